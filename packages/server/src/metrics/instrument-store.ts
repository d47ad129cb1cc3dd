import { AUDIT_EVENT_TYPES, type AuditEventDraft } from '@svc/core';
import { STORE_OPERATIONS, type Store } from '@svc/core/store';
import type { ServiceMetrics } from './metrics.js';

const EVENT_TYPES = new Set<string>(AUDIT_EVENT_TYPES);
const OPERATIONS = new Set<string>(STORE_OPERATIONS);

function isDraft(value: unknown): value is AuditEventDraft {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { type?: unknown }).type === 'string' &&
    EVENT_TYPES.has((value as { type: string }).type) &&
    typeof (value as { id?: unknown }).id === 'string' &&
    typeof (value as { data?: unknown }).data === 'object'
  );
}

/**
 * Whether an operation that was handed `event` committed it. Every store operation appends the
 * event it is given when it changes state; these answer "nothing changed" instead of throwing.
 */
function committed(operation: string, result: unknown): boolean {
  switch (operation) {
    case 'revokeSession':
    case 'revokeScimToken':
    case 'deleteGroup':
      return result === true;
    case 'createSession':
    case 'createLink':
    case 'createUser':
      return result === 'created';
    case 'saveGroup':
      return result === 'saved';
    case 'createLinkSession':
      return (result as { kind?: unknown } | null)?.kind === 'created';
    case 'changeUser':
      return ['updated', 'removed'].includes((result as { kind?: unknown } | null)?.kind as string);
    case 'enrollDevice':
      return result === 'enrolled';
    case 'completePairing':
      return (result as { kind?: unknown } | null)?.kind === 'completed';
    case 'consumeBootstrapToken':
      return (result as { kind?: unknown } | null)?.kind === 'enrolled';
    case 'removeDevice':
      return (result as { removed?: unknown } | null)?.removed === true;
    case 'rotateRefreshToken':
      return ['rotated', 'rotated_in_grace', 'reused'].includes((result as { kind?: unknown } | null)?.kind as string);
    case 'recordPairingFailure':
      return result !== null;
    default:
      return true;
  }
}

/**
 * Wraps a store so that every operation of the store contract is timed
 * (`svc_store_operation_duration_seconds`) and every audit event it commits is counted once,
 * where its outcome is known: the event handed to the operation, or the last one its audit
 * callback returned (a retried transaction calls it again), counted only when the operation
 * resolves and committed it. Nothing else changes: same results, same errors.
 *
 * @example
 * const deps = { ...deps, store: instrumentStore(deps.store, metrics) };
 */
export function instrumentStore<S extends Store>(store: S, metrics: ServiceMetrics): S {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof prop !== 'string' || !OPERATIONS.has(prop) || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        // The events handed in (one, or a list), then those the last call of each decision
        // callback returned (one, or a `{events}` list beside the change it decided).
        const given: AuditEventDraft[] = [];
        const decided = new Map<number, AuditEventDraft[]>();
        const wrapped = args.map((arg, i) => {
          if (isDraft(arg)) given.push(arg);
          else if (Array.isArray(arg)) given.push(...arg.filter(isDraft));
          if (typeof arg !== 'function') return arg;
          return (...inner: unknown[]) => {
            const out = (arg as (...a: unknown[]) => unknown)(...inner);
            const events = (out as { events?: unknown } | null)?.events;
            decided.set(i, isDraft(out) ? [out] : Array.isArray(events) ? events.filter(isDraft) : []);
            return out;
          };
        });
        const started = performance.now();
        let result: unknown;
        try {
          result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, wrapped);
        } catch (error) {
          metrics.observeStoreOperation(prop, (performance.now() - started) / 1000, true);
          throw error;
        }
        metrics.observeStoreOperation(prop, (performance.now() - started) / 1000, false);
        if (committed(prop, result)) for (const event of [...given, ...[...decided.values()].flat()]) metrics.recordAuditEvent(event);
        return result;
      };
    },
  });
}
