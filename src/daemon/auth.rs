//! Who calls the API, and what they may do: named operators and their roles (docs/api.md,
//! "Authentication").
//!
//! - A token file (`migrate run --token-file`) holds one `name role token` line per person or
//!   robot (roles [`Role::Viewer`], [`Role::Operator`], [`Role::Admin`]); `#` starts a comment.
//!   A file of one line holding one word is the single shared token of before (an admin with no
//!   name: the journal says `api:<daemon id>`). The token `-` names a person who signs in only
//!   through the authenticating proxy (below).
//! - The file is read again when its content changes (its digest, compared at each request that
//!   needs it: a token replaced by one of the same length with the time and inode kept is
//!   noticed): adding or removing a person needs no restart. A file that no longer parses
//!   refuses every mutation, naming its lines, until it is fixed (fail closed: a typo never
//!   keeps a removed token working).
//! - `--trust-identity-header X-Forwarded-User` takes the caller's name from that header, only
//!   when the request comes from one of the `--trusted-proxy` addresses; from anywhere else the
//!   header is ignored. The name's role is its line in the roles file (`--roles-file`: `name
//!   role` lines, the token file's format without the token), else its line in the token file,
//!   else viewer. A header sent twice is refused (a proxy that appends would let the client
//!   choose the first).
//!
//! # Guarantees
//! Tokens are compared in constant time against every line (no early exit), never logged, and
//! never in an error message: no error quotes any field of a token or roles file (a file edited
//! with its columns swapped would put a token where a name or a role is expected), it names the
//! line and the word's position.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{HeaderMap, HeaderName, header};
use ipnet::IpNet;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Reads only: every action is refused (`403`); the console shows no action buttons.
    Viewer,
    /// Every action but the points of no return.
    Operator,
    /// Every action, the points of no return (entering `complete`) included.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    fn parse(text: &str) -> Option<Role> {
        match text {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `None`: the single shared token (or no token at all), whose holder is unknown.
    pub name: Option<String>,
    pub role: Role,
}

impl Principal {
    /// The journal's actor: `api:NAME`, or `api:<daemon id>` when the caller has no name.
    pub fn actor(&self, holder: &str) -> String {
        format!("api:{}", self.name.as_deref().unwrap_or(holder))
    }

    /// The caller as a refusal names them (`alice (viewer)`, `this token (viewer)`).
    pub fn describe(&self) -> String {
        format!(
            "{} ({})",
            self.name.as_deref().unwrap_or("this token"),
            self.role.as_str()
        )
    }
}

/// Which file a text is: the token file, or the roles of proxied names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `--token-file`: `name role token` lines, or one word (the single shared token).
    Tokens,
    /// `--roles-file`: `name role` lines.
    Roles,
}

impl FileKind {
    fn shape(self) -> &'static str {
        match self {
            FileKind::Tokens => "`name role token` (e.g. `alice operator 6f1c...`)",
            FileKind::Roles => "`name role` (e.g. `alice operator`)",
        }
    }

    fn empty(self) -> &'static str {
        match self {
            FileKind::Tokens => "is empty: no token in it",
            FileKind::Roles => "is empty: no `name role` line in it",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            FileKind::Tokens => "--token-file",
            FileKind::Roles => "--roles-file",
        }
    }
}

/// One line of a token file.
#[derive(Clone)]
struct Entry {
    name: Option<String>,
    role: Role,
    /// `None`: `-`, signs in through the proxy only.
    token: Option<String>,
}

/// The parsed token file.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("{}:{}", e.name.as_deref().unwrap_or("*"), e.role.as_str()))
            .collect();
        f.debug_struct("Tokens").field("entries", &names).finish()
    }
}

/// A line of a token file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct LineError {
    pub line: usize,
    pub why: String,
}

/// Whether `name` may name a caller: letters, digits and `._@+-`, 1 to 128 (an e-mail address
/// from a proxy fits).
pub fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@+-".contains(&b))
}

/// Whether the request says its body is JSON (a web page cannot send that cross-site without
/// the browser asking the server first, and the daemon answers no such preflight).
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// Whether the presented token is ours, in a time that depends on neither token's length nor
/// content: their SHA-256 digests are compared, every byte.
fn same(presented: &str, ours: &str) -> bool {
    use sha2::Digest;
    let (a, b) = (sha2::Sha256::digest(presented), sha2::Sha256::digest(ours));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

impl Tokens {
    /// One shared token: an admin without a name (`MIGRATE_API_TOKEN`, a one-word file).
    pub fn single(token: String) -> Tokens {
        Tokens {
            entries: vec![Entry {
                name: None,
                role: Role::Admin,
                token: Some(token),
            }],
        }
    }

    /// Parse a token file: blank lines and `#` comments skipped; either one line of one word
    /// (the single token) or `name role token` lines.
    ///
    /// # Errors
    /// Every line that does not parse, with its number (1-based), and a file without a token.
    pub fn parse(text: &str) -> Result<Tokens, Vec<LineError>> {
        Tokens::parse_as(text, FileKind::Tokens)
    }

    /// Parse a roles file: `name role` lines (a third word, a token or `-`, is allowed so that a
    /// token file may serve as one; tokens of a roles file are never used).
    ///
    /// # Errors
    /// Every line that does not parse, with its number (1-based), and a file without a line.
    pub fn parse_roles(text: &str) -> Result<Tokens, Vec<LineError>> {
        Tokens::parse_as(text, FileKind::Roles)
    }

    fn parse_as(text: &str, kind: FileKind) -> Result<Tokens, Vec<LineError>> {
        let lines: Vec<(usize, Vec<&str>)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
            .filter(|(_, l)| !l.is_empty())
            .map(|(n, l)| (n, l.split_whitespace().collect()))
            .collect();
        if kind == FileKind::Tokens
            && let [(_, words)] = lines.as_slice()
            && let [token] = words.as_slice()
        {
            return Ok(Tokens::single((*token).to_string()));
        }
        let mut errors = Vec::new();
        let mut entries: Vec<(usize, Entry)> = Vec::new();
        for (line, words) in lines {
            let mut fail = |why: String| errors.push(LineError { line, why });
            let (name, role, token) = match (kind, words.as_slice()) {
                (_, [name, role, token]) => (*name, *role, Some(*token)),
                (FileKind::Roles, [name, role]) => (*name, *role, None),
                _ => {
                    fail(format!(
                        "expected {}, found {} word{}",
                        kind.shape(),
                        words.len(),
                        if words.len() == 1 { "" } else { "s" }
                    ));
                    continue;
                }
            };
            // No message quotes a word of the line: with its columns swapped, a line's name or
            // role may be somebody's token.
            if !valid_name(name) {
                fail(
                    "the first word (the name) is not letters, digits and `._@+-` (1 to 128)"
                        .into(),
                );
                continue;
            }
            let Some(role) = Role::parse(role) else {
                fail("the second word (the role) is not viewer, operator or admin".into());
                continue;
            };
            let token = match kind {
                FileKind::Tokens => token.filter(|t| *t != "-").map(str::to_string),
                FileKind::Roles => None,
            };
            if token.as_ref().is_some_and(|t| t.len() < 16) {
                fail(
                    "the third word (the token) is shorter than 16 characters (e.g. `openssl rand -hex 32`)"
                        .into(),
                );
                continue;
            }
            if let Some((first, _)) = entries
                .iter()
                .find(|(_, e)| e.name.as_deref() == Some(name))
            {
                fail(format!(
                    "the name is line {first}'s too (one line per person)"
                ));
                continue;
            }
            if let Some(t) = &token
                && let Some((first, _)) = entries
                    .iter()
                    .find(|(_, e)| e.token.as_ref().is_some_and(|o| same(t, o)))
            {
                fail(format!(
                    "the token is line {first}'s too (each person needs their own)"
                ));
                continue;
            }
            entries.push((
                line,
                Entry {
                    name: Some(name.to_string()),
                    role,
                    token,
                },
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if entries.is_empty() {
            return Err(vec![LineError {
                line: 0,
                why: kind.empty().into(),
            }]);
        }
        Ok(Tokens {
            entries: entries.into_iter().map(|(_, e)| e).collect(),
        })
    }

    /// The caller a presented token belongs to: compared with every line, in constant time.
    pub fn find(&self, presented: &str) -> Option<Principal> {
        let mut found = None;
        for e in &self.entries {
            if e.token.as_ref().is_some_and(|t| same(presented, t)) && found.is_none() {
                found = Some(Principal {
                    name: e.name.clone(),
                    role: e.role,
                });
            }
        }
        found
    }

    /// The role of a name a trusted proxy vouched for: its line's, else viewer.
    pub fn role_of(&self, name: &str) -> Role {
        self.entries
            .iter()
            .find(|e| e.name.as_deref() == Some(name))
            .map_or(Role::Viewer, |e| e.role)
    }
}

/// What identifies a version of the file: the SHA-256 of its content (a token replaced by one
/// of the same length, with the modification time and the inode kept, is a new version).
type Stamp = [u8; 32];

/// The tokens as last read, or why they could not be.
type Read = Result<Arc<Tokens>, String>;

/// A token file (or a roles file), read again when its content changes.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    kind: FileKind,
    state: Mutex<(Option<Stamp>, Read)>,
}

impl TokenFile {
    /// Read the token file once.
    ///
    /// # Errors
    /// The file cannot be read, or does not parse (every bad line, with its number).
    pub fn open(path: &Path) -> Result<TokenFile, String> {
        TokenFile::open_as(path, FileKind::Tokens)
    }

    /// Read a file of `kind` once.
    ///
    /// # Errors
    /// The file cannot be read, or does not parse (every bad line, with its number).
    pub fn open_as(path: &Path, kind: FileKind) -> Result<TokenFile, String> {
        let f = TokenFile {
            path: path.to_path_buf(),
            kind,
            state: Mutex::new((None, Err(String::new()))),
        };
        f.current().map(|_| f)
    }

    fn parse(&self, text: &str) -> Read {
        let parsed = match self.kind {
            FileKind::Tokens => Tokens::parse(text),
            FileKind::Roles => Tokens::parse_roles(text),
        };
        parsed.map(Arc::new).map_err(|errors| {
            let lines: Vec<String> = errors
                .iter()
                .map(|e| {
                    if e.line == 0 {
                        e.why.clone()
                    } else {
                        e.to_string()
                    }
                })
                .collect();
            format!(
                "{} {}: {}",
                self.kind.flag(),
                self.path.display(),
                lines.join("; ")
            )
        })
    }

    /// The tokens as the file says now: parsed again when its content changed.
    ///
    /// # Errors
    /// The file cannot be read or does not parse now (the tokens read before are not used).
    pub fn current(&self) -> Result<Arc<Tokens>, String> {
        use sha2::Digest;
        // Bounded like a `file:` secret (64 KiB): a device or a huge file is refused.
        let text = crate::plan::bounds::read_secret_file(&self.path)
            .map_err(|e| format!("{} {}: {e}", self.kind.flag(), self.path.display()));
        let stamp = text
            .as_ref()
            .ok()
            .map(|t| <[u8; 32]>::from(sha2::Sha256::digest(t.as_bytes())));
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if stamp.is_none() || state.0 != stamp {
            let read = text.and_then(|t| self.parse(&t));
            match &read {
                Ok(t) if state.0.is_some() => tracing::info!(
                    "read {} {} again: {} line(s)",
                    self.kind.flag(),
                    self.path.display(),
                    t.entries.len()
                ),
                Err(e) if state.1.is_ok() => tracing::warn!("{e}: every mutation is refused"),
                _ => {}
            }
            *state = (stamp, read);
        }
        state.1.clone()
    }
}

/// Where tokens come from.
#[derive(Debug, Clone, Default)]
pub enum TokenSource {
    /// No token: mutations only from this machine, not from web pages.
    #[default]
    None,
    /// Fixed at start (`MIGRATE_API_TOKEN`).
    Fixed(Arc<Tokens>),
    /// A file read again when it changes (`--token-file`).
    File(Arc<TokenFile>),
}

/// How the API knows who calls.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub tokens: TokenSource,
    /// `--trust-identity-header`: the header an authenticating proxy sets.
    pub identity_header: Option<HeaderName>,
    /// `--roles-file`: the roles of the names the proxy vouches for (else the token file's
    /// lines, else viewer).
    pub roles: Option<Arc<TokenFile>>,
    /// `--trusted-proxy`: the only peers whose identity header is believed.
    pub trusted_proxies: Vec<IpNet>,
}

/// Why a caller is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `401`: no credential.
    Missing,
    /// `403`: a token no line has.
    Wrong,
    /// `503`: the token file cannot be read or does not parse now.
    File(String),
    /// `403`: a proxy's identity header that is not a name.
    BadIdentity,
    /// `403`: the identity header more than once (a proxy that appends to the client's own
    /// header would let the client choose).
    RepeatedIdentity,
}

impl Refusal {
    /// The reason, as the log says it: never a token, never a header's value.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "no credential",
            Refusal::Wrong => "a token no line has",
            Refusal::File(_) => "the token or roles file does not parse",
            Refusal::BadIdentity => "the proxy's identity header is not a name",
            Refusal::RepeatedIdentity => "the proxy's identity header came more than once",
        }
    }
}

/// How a caller was recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// No credential needed (the daemon has none configured).
    Open,
    /// `Authorization: Bearer`.
    Token,
    /// A trusted proxy's identity header (a browser's cookie behind it: checked as a web page).
    Proxy,
}

impl Access {
    /// One shared token (`MIGRATE_API_TOKEN`): a nameless admin.
    pub fn single_token(token: String) -> Access {
        Access {
            tokens: TokenSource::Fixed(Arc::new(Tokens::single(token))),
            ..Access::default()
        }
    }

    /// Whether callers must present something (a token, or come through the proxy).
    pub fn required(&self) -> bool {
        !matches!(self.tokens, TokenSource::None) || self.identity_header.is_some()
    }

    /// The role of a name the proxy vouched for: the roles file's line, else the token file's,
    /// else viewer.
    fn proxied_role(&self, name: &str) -> Result<Role, Refusal> {
        if let Some(roles) = &self.roles {
            return roles
                .current()
                .map(|r| r.role_of(name))
                .map_err(Refusal::File);
        }
        Ok(self.tokens()?.map_or(Role::Viewer, |t| t.role_of(name)))
    }

    fn tokens(&self) -> Result<Option<Arc<Tokens>>, Refusal> {
        match &self.tokens {
            TokenSource::None => Ok(None),
            TokenSource::Fixed(t) => Ok(Some(t.clone())),
            TokenSource::File(f) => f.current().map(Some).map_err(Refusal::File),
        }
    }

    /// Whether `peer` may vouch for a caller with the identity header.
    pub fn trusts(&self, peer: Option<IpAddr>) -> bool {
        peer.is_some_and(|ip| {
            let ip = match ip {
                IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                v4 @ IpAddr::V4(_) => v4,
            };
            self.trusted_proxies.iter().any(|n| n.contains(&ip))
        })
    }

    /// Who calls: a trusted proxy's identity header first (its name's role from the roles
    /// file, else the token file, else viewer), then a bearer token; the single shared token
    /// and a daemon without tokens give a nameless admin.
    ///
    /// # Errors
    /// [`Refusal`].
    pub fn identify(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<(Principal, Via), Refusal> {
        if let Some(h) = &self.identity_header
            && self.trusts(peer)
            && let Some(v) = headers.get(h)
        {
            if headers.get_all(h).iter().nth(1).is_some() {
                return Err(Refusal::RepeatedIdentity);
            }
            let name = v.to_str().map(str::trim).unwrap_or("");
            if !valid_name(name) {
                return Err(Refusal::BadIdentity);
            }
            let role = self.proxied_role(name)?;
            return Ok((
                Principal {
                    name: Some(name.to_string()),
                    role,
                },
                Via::Proxy,
            ));
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(tokens) = self.tokens()? else {
            if self.identity_header.is_some() {
                return Err(Refusal::Missing);
            }
            let open = Principal {
                name: None,
                role: Role::Admin,
            };
            return Ok((open, Via::Open));
        };
        let Some(presented) = presented else {
            return Err(Refusal::Missing);
        };
        tokens
            .find(presented)
            .map(|p| (p, Via::Token))
            .ok_or(Refusal::Wrong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[cfg(unix)]
    fn inode(m: &std::fs::Metadata) -> u64 {
        std::os::unix::fs::MetadataExt::ino(m)
    }

    #[cfg(not(unix))]
    fn inode(_: &std::fs::Metadata) -> u64 {
        0
    }

    const A: &str = "alice-token-0123456789";
    const B: &str = "bob-token-0123456789ab";
    const C: &str = "carol-token-0123456789";

    fn file() -> String {
        format!(
            "# who may act\nalice admin {A}\n\nbob operator {B}   # on call\ncarol viewer {C}\ndan operator -\n"
        )
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {token}")).unwrap_or_else(|e| panic!("{e}")),
        );
        h
    }

    fn access(tokens: Tokens) -> Access {
        Access {
            tokens: TokenSource::Fixed(Arc::new(tokens)),
            ..Access::default()
        }
    }

    #[test]
    fn each_line_names_a_person_and_a_role() {
        let t = Tokens::parse(&file()).unwrap_or_else(|e| panic!("{e:?}"));
        let who = |tok: &str| t.find(tok).map(|p| (p.name.unwrap_or_default(), p.role));
        assert_eq!(who(A), Some(("alice".into(), Role::Admin)));
        assert_eq!(who(B), Some(("bob".into(), Role::Operator)));
        assert_eq!(who(C), Some(("carol".into(), Role::Viewer)));
        assert_eq!(who("-"), None, "`-` is no token");
        assert_eq!(who("alice-token-012345678"), None);
        assert_eq!(t.role_of("dan"), Role::Operator);
        assert_eq!(t.role_of("eve"), Role::Viewer);
        let p = t.find(B).unwrap_or_else(|| panic!("bob"));
        assert_eq!(p.actor("daemon-a"), "api:bob");
        // The Debug form never shows a token.
        assert!(!format!("{t:?}").contains("token-0123"), "{t:?}");
    }

    #[test]
    fn the_single_token_form_is_a_nameless_admin() {
        let t = Tokens::parse("# shared\n  s3cret-of-old \n").unwrap_or_else(|e| panic!("{e:?}"));
        let p = t.find("s3cret-of-old").unwrap_or_else(|| panic!("found"));
        assert_eq!(p.role, Role::Admin);
        assert_eq!(p.actor("daemon-a"), "api:daemon-a");
    }

    #[test]
    fn malformed_lines_are_reported_with_their_line_numbers() {
        let text = format!(
            "alice admin {A}\nbob\nbob root {B}\ncarol viewer short\nal!ce operator {C}\nalice operator {C}\ndan operator {A}\n"
        );
        let errors = Tokens::parse(&text).err().unwrap_or_default();
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6, 7], "{errors:?}");
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            text[0].starts_with("line 2: expected `name role token`"),
            "{text:?}"
        );
        assert!(
            text[1].contains("the second word (the role) is not viewer, operator or admin"),
            "{text:?}"
        );
        assert!(text[2].contains("shorter than 16"), "{text:?}");
        assert!(text[3].contains("the first word (the name)"), "{text:?}");
        assert!(text[4].contains("the name is line 1's too"), "{text:?}");
        assert!(text[5].contains("the token is line 1's too"), "{text:?}");
        // No error message holds a token.
        assert!(text.iter().all(|l| !l.contains("token-0123")), "{text:?}");
        assert!(Tokens::parse("# nothing\n\n").is_err());
    }

    /// Regression: a token file edited with two columns swapped put a token into the 503 body
    /// sent to callers with no credential, and into the log (`the role "<token>" is not ...`).
    #[test]
    fn no_error_quotes_a_field_of_a_token_file_edited_with_its_columns_swapped() {
        let swapped = [
            format!("zoe {A} admin\nyuri operator {B}\n"),
            format!("{A} zoe admin\nyuri operator {B}\n"),
            format!("zoe admin {A}\n{B} operator yuri\n"),
            format!("zoe admin {A}\nzoe operator {B}\nyuri {C}\n"),
        ];
        for text in swapped {
            let errors = Tokens::parse(&text).err().unwrap_or_default();
            assert!(!errors.is_empty(), "{text}");
            for e in errors {
                let e = e.to_string();
                for field in [A, B, C, "zoe", "yuri"] {
                    assert!(!e.contains(field), "{e:?} quotes {field:?}");
                }
            }
        }
    }

    /// Regression: with `--trust-identity-header` and no `--token-file`, every proxied name was
    /// an operator (docs/api.md said viewer).
    #[test]
    fn a_proxied_name_is_a_viewer_unless_a_roles_file_gives_it_a_role() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-user", HeaderValue::from_static("dan"));
        let proxy: IpAddr = "127.0.0.1".parse().unwrap_or_else(|e| panic!("{e}"));
        let mut a = Access {
            identity_header: Some(HeaderName::from_static("x-forwarded-user")),
            trusted_proxies: vec![IpNet::from(proxy)],
            ..Access::default()
        };
        let role = |a: &Access, h: &HeaderMap| a.identify(h, Some(proxy)).map(|(p, _)| p.role);
        assert_eq!(role(&a, &h), Ok(Role::Viewer));

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("roles");
        std::fs::write(&path, "# proxied names\ndan operator\nerin admin\n")
            .unwrap_or_else(|e| panic!("{e}"));
        a.roles = Some(Arc::new(
            TokenFile::open_as(&path, FileKind::Roles).unwrap_or_else(|e| panic!("{e}")),
        ));
        assert_eq!(role(&a, &h), Ok(Role::Operator));
        h.insert("x-forwarded-user", HeaderValue::from_static("erin"));
        assert_eq!(role(&a, &h), Ok(Role::Admin));
        h.insert("x-forwarded-user", HeaderValue::from_static("frank"));
        assert_eq!(role(&a, &h), Ok(Role::Viewer));
        // A roles file holds no token: without a token file, a bearer token is no credential.
        assert_eq!(a.identify(&bearer(A), None), Err(Refusal::Missing));
        // A roles file that no longer parses refuses the proxied callers (fail closed).
        std::fs::write(&path, "dan operatr\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(role(&a, &h), Err(Refusal::File(why)) if why.contains("line 1")));
    }

    /// Regression: with the identity header twice, the first value won (a proxy that appends
    /// to the client's own header let the client choose the name).
    #[test]
    fn a_repeated_identity_header_is_refused() {
        let t = Tokens::parse(&file()).unwrap_or_else(|e| panic!("{e:?}"));
        let proxy: IpAddr = "127.0.0.1".parse().unwrap_or_else(|e| panic!("{e}"));
        let a = Access {
            identity_header: Some(HeaderName::from_static("x-forwarded-user")),
            trusted_proxies: vec![IpNet::from(proxy)],
            ..access(t)
        };
        let mut h = HeaderMap::new();
        h.append("x-forwarded-user", HeaderValue::from_static("alice"));
        h.append("x-forwarded-user", HeaderValue::from_static("carol"));
        assert_eq!(a.identify(&h, Some(proxy)), Err(Refusal::RepeatedIdentity));
    }

    /// Regression: a token changed to one of the same length, with the file's modification
    /// time and inode kept, was not noticed: the old token kept working.
    #[test]
    fn a_token_changed_to_one_of_the_same_length_with_mtime_and_inode_kept_is_noticed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("alice admin {A}\n")).unwrap_or_else(|e| panic!("{e}"));
        let before = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        let f = TokenFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(f.current().is_ok_and(|t| t.find(A).is_some()));
        let replaced = "alice-token-9876543210";
        assert_eq!(replaced.len(), A.len());
        // Rewritten in place (the same inode), its modification time set back.
        std::fs::write(&path, format!("alice admin {replaced}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{e}"));
        file.set_modified(before.modified().unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        drop(file);
        let after = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (after.len(), after.modified().ok(), inode(&after)),
            (before.len(), before.modified().ok(), inode(&before)),
            "the file looks unchanged by its metadata"
        );
        let now = f.current().unwrap_or_else(|e| panic!("{e}"));
        assert!(now.find(A).is_none(), "the old token no longer works");
        assert!(now.find(replaced).is_some());
    }

    #[test]
    fn the_token_file_is_read_again_when_it_changes_and_fails_closed_when_broken() {
        let dir = std::env::temp_dir().join(format!("qm-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join("tokens");
        std::fs::write(&path, format!("alice admin {A}\n")).unwrap_or_else(|e| panic!("{e}"));
        let f = Arc::new(TokenFile::open(&path).unwrap_or_else(|e| panic!("{e}")));
        let a = Access {
            tokens: TokenSource::File(f),
            ..Access::default()
        };
        assert!(a.identify(&bearer(B), None).is_err());
        // bob added (a longer file: the size alone says it changed).
        std::fs::write(&path, format!("alice admin {A}\nbob operator {B}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let (p, via) = a
            .identify(&bearer(B), None)
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            (p.name.as_deref(), p.role, via),
            (Some("bob"), Role::Operator, Via::Token)
        );
        // A typo: nobody acts until it is fixed, and the answer names the line.
        std::fs::write(&path, format!("alice admin {A}\nbob operatr {B}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        match a.identify(&bearer(A), None) {
            Err(Refusal::File(why)) => assert!(why.contains("line 2"), "{why}"),
            other => panic!("{other:?}"),
        }
        // bob removed.
        std::fs::write(&path, format!("alice admin {A}\n")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.identify(&bearer(B), None), Err(Refusal::Wrong));
        assert!(a.identify(&bearer(A), None).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_identity_header_is_believed_only_from_a_trusted_proxy() {
        let t = Tokens::parse(&file()).unwrap_or_else(|e| panic!("{e:?}"));
        let a = Access {
            identity_header: Some(HeaderName::from_static("x-forwarded-user")),
            trusted_proxies: vec!["10.0.0.0/8".parse().unwrap_or_else(|e| panic!("{e}"))],
            ..access(t)
        };
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-user", HeaderValue::from_static("dan"));
        let proxy: IpAddr = "10.1.2.3".parse().unwrap_or_else(|e| panic!("{e}"));
        let (p, via) = a
            .identify(&h, Some(proxy))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            (p.actor("d"), p.role, via),
            ("api:dan".into(), Role::Operator, Via::Proxy)
        );
        // An IPv4-mapped IPv6 peer is the same address.
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            a.identify(&h, Some(mapped))
                .is_ok_and(|(_, v)| v == Via::Proxy)
        );
        // From anyone else the header is ignored: the token decides.
        let elsewhere: IpAddr = "192.168.1.9".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.identify(&h, Some(elsewhere)), Err(Refusal::Missing));
        assert_eq!(a.identify(&h, None), Err(Refusal::Missing));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer carol-token-0123456789"),
        );
        let (p, _) = a
            .identify(&h, Some(elsewhere))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(p.name.as_deref(), Some("carol"));
        // A name nobody listed is a viewer; a value that is not a name is refused.
        h.insert(
            "x-forwarded-user",
            HeaderValue::from_static("eve@example.com"),
        );
        assert!(
            a.identify(&h, Some(proxy))
                .is_ok_and(|(p, _)| p.role == Role::Viewer)
        );
        h.insert("x-forwarded-user", HeaderValue::from_static("eve <script>"));
        assert_eq!(a.identify(&h, Some(proxy)), Err(Refusal::BadIdentity));
    }

    #[test]
    fn without_tokens_the_caller_is_open_unless_a_proxy_is_expected() {
        let a = Access::default();
        assert!(!a.required());
        assert!(
            a.identify(&HeaderMap::new(), None)
                .is_ok_and(|(p, v)| { p.role == Role::Admin && v == Via::Open })
        );
        let a = Access {
            identity_header: Some(HeaderName::from_static("x-forwarded-user")),
            ..Access::default()
        };
        assert!(a.required());
        assert_eq!(a.identify(&HeaderMap::new(), None), Err(Refusal::Missing));
    }
}
