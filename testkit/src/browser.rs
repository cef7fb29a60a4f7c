//! A real browser for the web view's tests: headless Chromium driven through chromedriver
//! (Debian's `chromium` and `chromium-driver`) over the W3C WebDriver protocol. The protocol
//! is a few JSON requests, made here with ureq: the WebDriver clients on crates.io run on
//! an async runtime, which nothing else in the tests needs.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a page is given to show what is waited for.
const PATIENCE: Duration = Duration::from_secs(30);

/// A `transcript-sync ui` process, once it has printed its link; stopped when dropped.
pub struct WebView {
    child: Child,
    /// The link it printed, token included.
    pub url: String,
    /// Its address, `http://IP:PORT`.
    pub base: String,
}

impl WebView {
    /// Runs `cmd` (a `ui --no-open` command line) and reads the link it prints first; what it
    /// prints after is read too, so that it never writes to a closed pipe.
    pub fn start(mut cmd: Command) -> WebView {
        use std::io::{BufRead, BufReader};
        cmd.stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("ui starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("ui prints its link").unwrap();
        let url = (first.split_once("serving "))
            .unwrap_or_else(|| panic!("no link in {first:?}"))
            .1
            .to_owned();
        std::thread::spawn(move || lines.for_each(drop));
        let base = url.split_once("/?token=").unwrap().0.to_owned();
        WebView { child, url, base }
    }

    /// The token in its link.
    pub fn token(&self) -> &str {
        self.url.split_once("token=").unwrap().1
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for WebView {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium with its own profile, closed when dropped.
pub struct Browser {
    driver: Child,
    session: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

/// Chromium's binary: Debian's, else on PATH.
fn chromium() -> String {
    for path in [
        "/usr/lib/chromium/chromium",
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
    ] {
        if Path::new(path).exists() {
            return path.to_owned();
        }
    }
    "chromium".to_owned()
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium of 1280×900 through it.
    pub fn start() -> Browser {
        let port = crate::ports::free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (Debian's chromium-driver; scripts/test installs it)");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let ready = (agent.get(format!("{base}/status")).call().ok())
                .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--hide-scrollbars".to_owned(),
            "--window-size=1280,900".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium(), "args": args},
        }}});
        let mut response = agent
            .post(format!("{base}/session"))
            .send_json(&caps)
            .expect("chromedriver answers");
        let value: Value = response.body_mut().read_json().unwrap();
        let id = value["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {value}"))
            .to_owned();
        Browser {
            driver,
            session: format!("{base}/session/{id}"),
            agent,
            _profile: profile,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.session);
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, body) => self.agent.post(&url).send_json(body.unwrap_or(json!({}))),
        };
        let mut response = response.expect("chromedriver answers");
        let value: Value = response.body_mut().read_json().unwrap();
        value["value"].clone()
    }

    fn checked(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let value = self.call(method, path, body);
        if let Some(error) = value.get("error") {
            panic!("WebDriver {method} {path}: {error}: {}", value["message"]);
        }
        value
    }

    /// Opens `url` and waits for it to load.
    pub fn goto(&self, url: &str) {
        self.checked("POST", "/url", Some(json!({"url": url})));
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        self.checked("GET", "/url", None)
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The element `css` selects, if any.
    pub fn find(&self, css: &str) -> Option<String> {
        let body = json!({"using": "css selector", "value": css});
        let value = self.call("POST", "/element", Some(body));
        if value.get("error").is_some() {
            return None;
        }
        (value.as_object()?.values().next()?.as_str()).map(str::to_owned)
    }

    /// How many elements `css` selects.
    pub fn count(&self, css: &str) -> usize {
        let body = json!({"using": "css selector", "value": css});
        self.checked("POST", "/elements", Some(body))
            .as_array()
            .map_or(0, Vec::len)
    }

    /// The element `css` selects, once there is one.
    pub fn wait_for(&self, css: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(id) = self.find(css) {
                return id;
            }
            if Instant::now() > deadline {
                panic!(
                    "no {css} in the page at {}:\n{}",
                    self.url(),
                    self.text("body")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `cond` holds of the page.
    pub fn wait_until(&self, what: &str, mut cond: impl FnMut(&Browser) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !cond(self) {
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what} at {}:\n{}",
                    self.url(),
                    self.text("body")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The rendered text of the element `css` selects (as a person sees it: hidden text
    /// is not in it), or "" when there is none.
    pub fn text(&self, css: &str) -> String {
        match self.find(css) {
            Some(id) => self
                .checked("GET", &format!("/element/{id}/text"), None)
                .as_str()
                .unwrap_or("")
                .to_owned(),
            None => String::new(),
        }
    }

    /// Clicks the element `css` selects, once there is one.
    pub fn click(&self, css: &str) {
        let id = self.wait_for(css);
        // Into the middle of the window, clear of a bar fixed at its top.
        let element = json!({"element-6066-11e4-a52e-4f735466cecf": id});
        self.script(
            "arguments[0].scrollIntoView({block: 'center'})",
            json!([element]),
        );
        self.checked("POST", &format!("/element/{id}/click"), None);
    }

    /// Types `text` into the element `css` selects.
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.wait_for(css);
        self.checked(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        );
    }

    /// Presses and releases each key of `keys` in turn, as a keyboard does, to the element
    /// that has the focus. WebDriver's key codes name the keys that are no character
    /// (`\u{E007}` Enter); a modifier among them (`\u{E008}` Shift, `\u{E009}` Control,
    /// `\u{E00A}` Alt, `\u{E03D}` Meta) is held down from there to the end.
    pub fn press(&self, keys: &str) {
        let modifier = |k: char| ['\u{E008}', '\u{E009}', '\u{E00A}', '\u{E03D}'].contains(&k);
        let held: Vec<char> = keys.chars().filter(|k| modifier(*k)).collect();
        let mut actions: Vec<Value> = (keys.chars())
            .flat_map(|k| {
                let down = json!({"type": "keyDown", "value": k.to_string()});
                let up = json!({"type": "keyUp", "value": k.to_string()});
                if modifier(k) {
                    vec![down]
                } else {
                    vec![down, up]
                }
            })
            .collect();
        actions.extend(
            held.iter()
                .map(|k| json!({"type": "keyUp", "value": k.to_string()})),
        );
        let body = json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]});
        self.checked("POST", "/actions", Some(body));
        self.checked("DELETE", "/actions", None);
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns what it returns.
    pub fn script(&self, script: &str, args: Value) -> Value {
        self.checked(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Sends a Chrome DevTools Protocol command (`Emulation.setEmulatedMedia`, …) to the
    /// page through chromedriver, and returns its result.
    pub fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.checked(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
    }

    /// Saves a PNG of the page as it is shown to `path`.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine;
        let png = self.checked("GET", "/screenshot", None);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call("DELETE", "", None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
