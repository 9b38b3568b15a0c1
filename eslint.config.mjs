// ESLint (flat config) for the playground's plain JS modules: `make lint-js`, which runs
// `npx --yes eslint@9`. Self-contained: no plugin or shared config to install, so the rules of
// eslint:recommended are listed here, plus a few that keep the modules plain and their components
// free of page ids (only main.js, the page's composition root, looks elements up by id).

const recommended = Object.fromEntries(
  [
    "constructor-super", "for-direction", "getter-return", "no-async-promise-executor", "no-case-declarations",
    "no-class-assign", "no-compare-neg-zero", "no-cond-assign", "no-const-assign", "no-constant-binary-expression",
    "no-constant-condition", "no-control-regex", "no-debugger", "no-delete-var", "no-dupe-args",
    "no-dupe-class-members", "no-dupe-else-if", "no-dupe-keys", "no-duplicate-case", "no-empty",
    "no-empty-character-class", "no-empty-pattern", "no-empty-static-block", "no-ex-assign",
    "no-extra-boolean-cast", "no-fallthrough", "no-func-assign", "no-global-assign", "no-import-assign",
    "no-invalid-regexp", "no-irregular-whitespace", "no-loss-of-precision", "no-misleading-character-class",
    "no-new-native-nonconstructor", "no-nonoctal-decimal-escape", "no-obj-calls", "no-octal",
    "no-prototype-builtins", "no-redeclare", "no-regex-spaces", "no-self-assign", "no-setter-return",
    "no-shadow-restricted-names", "no-sparse-arrays", "no-this-before-super", "no-undef",
    "no-unexpected-multiline", "no-unreachable", "no-unsafe-finally", "no-unsafe-negation",
    "no-unsafe-optional-chaining", "no-unused-labels", "no-unused-private-class-members", "no-unused-vars",
    "no-useless-backreference", "no-useless-catch", "no-useless-escape", "no-with", "require-yield",
    "use-isnan", "valid-typeof",
  ].map((rule) => [rule, "error"]),
);

// What the page's scripts use of the browser (the `globals` package would list them all; no install needed).
const browser = Object.fromEntries(
  [
    "AbortController", "Blob", "CSS", "DOMParser", "Event", "FormData", "Headers", "HTMLElement",
    "IntersectionObserver", "Node", "ReadableStream", "Request", "Response", "TextDecoder", "TextDecoderStream", "TextEncoder", "URL",
    "URLSearchParams", "XMLHttpRequest", "cancelAnimationFrame", "clearInterval", "clearTimeout", "console",
    "document", "fetch", "getComputedStyle", "localStorage", "location", "navigator", "requestAnimationFrame",
    "sessionStorage", "setInterval", "setTimeout", "window",
  ].map((name) => [name, "readonly"]),
);

const ids = "Components take their elements from main.js; only main.js looks them up by id.";

export default [
  {
    files: ["src/calypso/playground/static/js/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: browser },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      ...recommended,
      eqeqeq: ["error", "always"],
      "no-var": "error",
      "prefer-const": "error",
      "no-implicit-globals": "error",
      "no-eval": "error",
      "no-implied-eval": "error",
      "no-new-func": "error",
    },
  },
  {
    files: ["src/calypso/playground/static/js/**/*.js"],
    ignores: ["src/calypso/playground/static/js/main.js", "src/calypso/playground/static/js/dom.js"],
    rules: {
      "no-restricted-imports": ["error", { paths: [{ name: "./dom.js", importNames: ["$"], message: ids }] }],
      "no-restricted-properties": [
        "error",
        { object: "document", property: "getElementById", message: ids },
        { object: "document", property: "querySelector", message: ids },
        { object: "document", property: "querySelectorAll", message: ids },
      ],
    },
  },
];
