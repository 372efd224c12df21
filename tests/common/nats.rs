//! The NATS server the broker tests run against.

/// The NATS server's `max_payload`, from its monitor's `/varz` (`QM_TEST_NATS_MONITOR_URL`),
/// else the server's default, 1 MiB.
pub async fn max_payload() -> usize {
    const DEFAULT: usize = 1024 * 1024;
    let Some(monitor) = std::env::var("QM_TEST_NATS_MONITOR_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        return DEFAULT;
    };
    // reqwest is built without a default TLS provider; the library installs this one too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let varz = async {
        let v: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/varz", monitor.trim_end_matches('/')))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        usize::try_from(v["max_payload"].as_u64()?).ok()
    };
    varz.await.unwrap_or(DEFAULT)
}
