import { readFileSync, writeFileSync } from 'node:fs';

// biome-ignore lint/suspicious/noExplicitAny: a credentials file is inspected field by field
type Json = any;

/**
 * The credentials of the current context of the credentials file at `path` (the file holds
 * `{"version":2,"current","contexts":{NAME: credentials}}`), as tests read tokens from it.
 */
export function currentCredentials(path: string): Json {
  const file = JSON.parse(readFileSync(path, 'utf8'));
  const current = file.contexts?.[file.current];
  if (current === undefined) throw new Error(`${path} has no current context`);
  return current;
}

/** Replaces the current context's credentials in the file at `path` with `credentials`. */
export function writeCurrentCredentials(path: string, credentials: Json): void {
  const file = JSON.parse(readFileSync(path, 'utf8'));
  file.contexts[file.current] = credentials;
  writeFileSync(path, JSON.stringify(file));
}
