// Package archrules has no code of its own: its tests hold staticlet's
// architecture rules, the ones ARCHITECTURE.md describes, and fail the
// build of any change that breaks them:
//
//   - imports (TestImportRules): the packages of the module import each
//     other only in the directions the layering allows, as written in one
//     table (rules). cmd may import every product package; reconcile
//     imports only pod, and talks to the adapters (watch, sandbox, health,
//     status) through interfaces it declares; the adapters import pod but
//     never each other nor reconcile; pod imports nothing of the module.
//     Test helpers (internal/testutil/...) are imported only by tests,
//     other helpers and tools, never by product code.
//   - package docs (TestPackageDocs): every package says its one job in a
//     package doc comment.
//   - shape (TestShape): no struct of the module over 15 fields, and no
//     function of the reconcile core over 80 lines, without a written
//     reason.
//   - the map (TestArchitectureMap): ARCHITECTURE.md's package map names
//     every package go list prints, and nothing else.
//
// They live in a package of their own so that they build from the standard
// library alone, in seconds, and run with the unit tests, apart from the
// tests that need containerd.
package archrules
