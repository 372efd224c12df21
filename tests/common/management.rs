//! RabbitMQ's management API, as the broker tests read it.

/// GET the resource at `path` (one segment each, encoded here: `["queues", "/", q]`) of the
/// management API at `api`, logged in as guest whatever credentials `api` holds.
pub async fn get(api: &str, path: &[&str]) -> serde_json::Value {
    let mut url = reqwest::Url::parse(api).unwrap();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.path_segments_mut().unwrap().pop_if_empty().extend(path);
    reqwest::Client::new()
        .get(url)
        .basic_auth("guest", Some("guest"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap()
}
