// The repository's shared test support, reachable from every depth of this package's tests
// (a file under test/real/ imports it as ../repo.js).
export * from '../../../test-support/browser.js';
export * from '../../../test-support/pages.js';
export * from '../../../test-support/repo.js';
