import { fileURLToPath } from 'node:url';

/**
 * The repository's root directory (with a trailing slash), for tests that read what a user
 * reads there (docs/, .gitignore, node_modules/.bin/svc) wherever the test file sits.
 *
 * @example
 * readFileSync(join(REPO_ROOT, 'docs/deployment.md'), 'utf8');
 */
export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
