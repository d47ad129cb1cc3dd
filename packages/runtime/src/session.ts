import type { AuthDeps } from '@svc/core';
import type { Store } from '@svc/core/store';
import type { Logger } from 'pino';
import { makeDeps, openControlStore } from './control.js';
import { createLogger } from './logger.js';
import { chosenProfile, loadProject, type Project } from './project.js';

/** An open project for an offline command: the configuration, the store and the use-case deps. */
export interface OpenProject {
  readonly project: Project;
  readonly store: Store;
  readonly deps: AuthDeps;
  readonly log: Logger;
}

/**
 * Loads the project, opens its control store and builds the deps, runs `fn`, and closes the
 * store whatever happens. Offline commands log warnings and errors only (stderr).
 *
 * @example
 * await withProject(dir, profileFlag, async ({ deps }) => enrollWithBootstrapToken(deps, input));
 */
export async function withProject<T>(dir: string, profileFlag: string | undefined, fn: (open: OpenProject) => Promise<T>): Promise<T> {
  const project = loadProject(dir, { profile: chosenProfile(profileFlag, process.env), env: process.env });
  const log = createLogger({ env: process.env, fallback: 'warn' });
  const store = await openControlStore(project, { create: false, log });
  try {
    const deps = await makeDeps(project, store, log);
    return await fn({ project, store, deps, log });
  } finally {
    await store.close();
  }
}
