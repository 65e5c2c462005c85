// The web UI's scripts are ES modules run by a browser: every name used is
// imported or declared (no-undef), nothing is left unused, and the
// recommended rules of ESLint hold, and no native confirm/prompt/alert
// (no-alert). Run by scripts/check-ui.
import js from "@eslint/js";
import globals from "globals";

export default [
  {
    files: ["**/*.js"],
    ...js.configs.recommended,
  },
  {
    files: ["**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: globals.browser,
    },
    rules: {
      "no-unused-vars": ["error", { args: "after-used", caughtErrors: "none" }],
      "no-shadow": "error",
      eqeqeq: ["error", "always"],
      // confirm/prompt/alert block the page and are hard to operate with a
      // screen reader: dialog.js has the in-page ones.
      "no-alert": "error",
    },
  },
];
