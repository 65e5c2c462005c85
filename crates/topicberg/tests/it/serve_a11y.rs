//! Accessibility of the web UI, checked with axe-core (npm `axe-core`,
//! pinned in `scripts/ui-lint/package.json`, installed by
//! `scripts/check-ui`): a page in a given state has no serious or critical
//! violation. No rule is switched off. And the layout at a phone's width
//! and at 200% zoom: the page never scrolls sideways.

use serde_json::Value;

use crate::serve_browser::Page;

/// axe-core's script, read once.
fn axe_source() -> &'static str {
    static SOURCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SOURCE.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scripts/ui-lint/node_modules/axe-core/axe.min.js");
        std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run scripts/check-ui once (it installs axe-core with npm ci)",
                path.display()
            )
        })
    })
}

impl Page {
    /// Runs axe-core on the page as it is now and fails naming every
    /// serious or critical violation (rule, what it wants, the elements).
    pub(crate) async fn assert_accessible(&self, state: &str) {
        let violations = self.serious_violations(state).await;
        assert_eq!(
            violations.as_array().map(Vec::len),
            Some(0),
            "accessibility violations on {state}: {violations:#}"
        );
    }

    /// The checker itself finds a violation: a button without a name
    /// (axe's `button-name`, critical) added to the page, then removed.
    pub(crate) async fn assert_axe_finds_a_nameless_button(&self) {
        let add = "const b = document.createElement('button'); b.id = 'axe-probe'; document.body.append(b);";
        self.client.execute(add, vec![]).await.unwrap();
        let violations = self
            .serious_violations("a page with a nameless button")
            .await;
        self.client
            .execute("document.getElementById('axe-probe').remove();", vec![])
            .await
            .unwrap();
        assert!(
            violations.to_string().contains("button-name"),
            "axe-core did not report a button without a name: {violations:#}"
        );
    }

    /// axe-core's serious and critical violations on the page now.
    async fn serious_violations(&self, state: &str) -> Value {
        let script = format!(
            "{}\n;const done = arguments[arguments.length - 1];
             window.axe.run(document, {{ resultTypes: ['violations'] }})
               .then((r) => done(JSON.stringify(r.violations
                 .filter((v) => v.impact === 'serious' || v.impact === 'critical')
                 .map((v) => ({{ id: v.id, impact: v.impact, help: v.help,
                   nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ')) }})))))
               .catch((e) => done(JSON.stringify([{{ id: 'axe-error', help: String(e) }}])));",
            axe_source()
        );
        let answer = self
            .client
            .execute_async(&script, vec![])
            .await
            .unwrap_or_else(|e| panic!("axe-core on {state}: {e}"));
        serde_json::from_str(answer.as_str().expect("axe-core answers a JSON text")).unwrap()
    }
}

/// A phone's viewport (CSS pixels), and 200% zoom of the test's 1280 x
/// 1000 window (640 x 500 CSS pixels, two device pixels each): `(width,
/// height, device pixels per CSS pixel)`. Emulated by Chromium's device
/// metrics (a headless window is never narrower than 500 px).
pub(crate) const NARROW_VIEWPORTS: [(u32, u32, u32); 2] = [(390, 844, 3), (640, 500, 2)];

/// At each of [`NARROW_VIEWPORTS`], in a browser session of its own
/// (logged in to `base`), every page of `hashes` fits the viewport's
/// width: the page itself never scrolls sideways (a wide table scrolls
/// inside its own box).
pub(crate) async fn assert_fits_narrow_viewports(
    webdriver: &str,
    profile: &std::path::Path,
    base: &str,
    hashes: &[String],
) {
    for (w, h, ratio) in NARROW_VIEWPORTS {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--no-first-run",
                    format!("--user-data-dir={}", profile.join(format!("narrow-{w}")).display())],
                "mobileEmulation": {"deviceMetrics": {"width": w, "height": h, "pixelRatio": ratio}},
            }),
        );
        let client = fantoccini::ClientBuilder::native()
            .capabilities(caps)
            .connect(webdriver)
            .await
            .expect("a Chromium session");
        let page = Page {
            client,
            base: base.to_string(),
            shots: std::env::temp_dir(),
            shot: 0,
        };
        page.log_in().await;
        // The emulated screen (the layout may be wider: a mobile browser
        // zooms out to show a page wider than its screen).
        let screen = page
            .client
            .execute("return screen.width;", vec![])
            .await
            .unwrap();
        assert_eq!(
            screen.as_u64(),
            Some(u64::from(w)),
            "the screen is not {w} px wide"
        );
        for hash in hashes {
            page.show_page(hash).await;
            let overflow = page.sideways_overflow(w).await;
            assert!(
                overflow.is_empty(),
                "{hash} at {w} px scrolls sideways; too wide: {overflow}"
            );
        }
        page.client.close().await.unwrap();
    }
}

impl Page {
    /// Goes to `hash` and waits until that page drew its heading (through
    /// a page that does not exist, so the last page's heading is gone).
    async fn show_page(&self, hash: &str) {
        self.go("#/no-such-page").await;
        self.text_until("main h1", std::time::Duration::from_secs(30), |t| {
            t == "Not found"
        })
        .await;
        self.go(hash).await;
        self.text_until("main h1", std::time::Duration::from_secs(30), |t| {
            !t.is_empty() && t != "Not found"
        })
        .await;
    }

    /// "" when the page is no wider than the `screen` (CSS pixels); else
    /// the elements that reach past it outside any box that scrolls.
    async fn sideways_overflow(&self, screen: u32) -> String {
        let script = "
            const root = document.documentElement;
            const width = arguments[0];
            if (root.scrollWidth <= width && window.innerWidth <= width) return '';
            const inScroller = (el) => {
              for (let p = el.parentElement; p; p = p.parentElement) {
                const o = getComputedStyle(p).overflowX;
                if (o === 'auto' || o === 'scroll' || o === 'hidden') return true;
              }
              return false;
            };
            const wide = [...document.body.querySelectorAll('*')]
              .filter((el) => el.getBoundingClientRect().right > width + 1 && !inScroller(el))
              .slice(0, 8)
              .map((el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '')
                + ' ' + Math.round(el.getBoundingClientRect().right) + 'px');
            return `page ${root.scrollWidth}px on a ${width}px screen: ${wide.join(', ')}`;";
        let answer = self
            .client
            .execute(script, vec![Value::from(screen)])
            .await
            .unwrap();
        answer.as_str().unwrap_or_default().to_string()
    }
}

/// The pages checked at a phone's width, populated: lists, forms, the
/// job, one of its runs and one of its tables.
pub(crate) async fn narrow_pages(page: &Page, job_id: i64, destination: i64) -> Vec<String> {
    page.go(&format!("#/jobs/{job_id}")).await;
    page.wait("a[href*='/tables/']").await;
    let links = page
        .client
        .execute(
            "return [...document.querySelectorAll('main a')].map((a) => a.getAttribute('href'));",
            vec![],
        )
        .await
        .unwrap();
    let links: Vec<String> = serde_json::from_value(links).unwrap();
    let first = |part: &str| {
        links
            .iter()
            .find(|l| l.contains(part))
            .unwrap_or_else(|| panic!("no {part} link on the job page: {links:?}"))
            .clone()
    };
    let mut pages: Vec<String> = [
        "#/jobs",
        "#/jobs/new",
        "#/sources",
        "#/sources/new",
        "#/destinations",
        "#/import",
    ]
    .map(String::from)
    .to_vec();
    pages.extend([
        format!("#/jobs/{job_id}"),
        format!("#/jobs/{job_id}/edit"),
        format!("#/jobs/{job_id}/streams"),
        format!("#/destinations/{destination}"),
        first("#/runs/"),
        first("/tables/"),
    ]);
    pages
}
