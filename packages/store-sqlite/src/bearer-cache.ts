import { digestsEqual } from '@svc/core';
import { type AccessRow, type SessionRecord, toSession } from '@svc/core/store';

/** The two reads a bearer check makes (the store's prepared statements). */
export interface BearerReads {
  /** `PRAGMA data_version`: changes when another connection commits. */
  readonly dataVersion: { get(): number | undefined };
  readonly sessionForAccess: { get(sessionId: string): AccessRow | undefined };
}

/** A bearer check waiting for its turn's shared freshness read. */
interface BearerLookup {
  readonly sessionId: string;
  readonly digest: string;
  readonly resolve: (session: SessionRecord | null) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Sessions as bearer checks last read them (each with its user's attributes), by id: the hot
 * path of every authenticated request skips its query while nothing changed. Never stale: every
 * write of this connection that changes a session's pair or revocation drops that session
 * ({@link BearerCache.drop}: a rotation, a revocation, a reuse; a device removal drops them all),
 * every write that changes a user drops its subject's sessions ({@link BearerCache.dropSubject};
 * a group's deletion drops them all), and any commit by another
 * connection or process (a CLI revocation, another server) changes `data_version`, which is
 * read before each use and then empties the whole cache.
 *
 * @example
 * const cache = new BearerCache(statements, 10_000);
 * const session = await cache.find(sessionId, accessDigest);
 */
export class BearerCache {
  /** Checks answered from the cache (`hits`) or read from the database (`misses`). */
  readonly counts = { hits: 0, misses: 0 };
  readonly #s: BearerReads;
  readonly #max: number;
  readonly #entries = new Map<string, { readonly record: SessionRecord; readonly accessDigest: string }>();
  #version = -1;
  #batch: BearerLookup[] = [];

  /** `max` sessions at most (0: none, every check reads the database). */
  constructor(statements: BearerReads, max: number) {
    this.#s = statements;
    this.#max = max;
  }

  /** Forgets one session (its pair or revocation changed). */
  drop(sessionId: string): void {
    this.#entries.delete(sessionId);
  }

  /**
   * Forgets every session of `subject` (its user changed: the attributes the check answers with
   * them). Walks the cache: user changes are rare beside bearer checks.
   */
  dropSubject(subject: string): void {
    for (const [id, entry] of this.#entries) if (entry.record.subject === subject) this.#entries.delete(id);
  }

  /** Forgets every session (many changed at once). */
  clear(): void {
    this.#entries.clear();
  }

  /**
   * The bearer check. Checks that arrive in one turn of the event loop wait for its check phase
   * (`setImmediate`) and share one freshness read (`PRAGMA data_version`, which costs a lock on
   * the WAL index, two `fcntl` calls, on every read). Still never stale: the read is taken
   * after every check of the batch was asked for, so after its request was read, and a commit
   * by any other process before that read empties the cache first.
   */
  find(sessionId: string, digest: string): Promise<SessionRecord | null> {
    return new Promise((resolve, reject) => {
      if (this.#batch.length === 0) setImmediate(this.#answerBatch);
      this.#batch.push({ sessionId, digest, resolve, reject });
    });
  }

  readonly #answerBatch = (): void => {
    const batch = this.#batch;
    this.#batch = [];
    try {
      // NaN (never equal) if the pragma ever answered nothing: the cache is then dropped, never trusted.
      const version = this.#s.dataVersion.get() ?? Number.NaN;
      if (version !== this.#version) {
        this.#entries.clear();
        this.#version = version;
      }
    } catch (error) {
      for (const lookup of batch) lookup.reject(error);
      return;
    }
    for (const lookup of batch) {
      try {
        lookup.resolve(this.#cached(lookup.sessionId, lookup.digest));
      } catch (error) {
        lookup.reject(error);
      }
    }
  };

  /** The session behind an access token, from the cache (fresh: see the batch) or the database. */
  #cached(sessionId: string, digest: string): SessionRecord | null {
    let entry = this.#entries.get(sessionId);
    if (entry !== undefined) this.counts.hits++;
    else {
      this.counts.misses++;
      const row = this.#s.sessionForAccess.get(sessionId);
      if (row === undefined) return null;
      entry = { record: toSession(row), accessDigest: row.access_digest };
      if (this.#max > 0) {
        // Bounded: the oldest entry (first in insertion order) makes room.
        if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value as string);
        this.#entries.set(sessionId, entry);
      }
    }
    return digestsEqual(entry.accessDigest, digest) ? entry.record : null;
  }
}
