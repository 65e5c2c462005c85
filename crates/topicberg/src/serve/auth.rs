//! See docs/serve.md (module table).
