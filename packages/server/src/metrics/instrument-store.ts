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
    case 'createSession':
    case 'revokeSession':
      return result === true;
    case 'enrollDevice':
      return result === 'enrolled';
    case 'completePairing':
      return (result as { kind?: unknown } | null)?.kind === 'completed';
    case 'consumeBootstrapToken':
      return (result as { kind?: unknown } | null)?.kind === 'enrolled';
    case 'removeDevice':
      return (result as { removed?: unknown } | null)?.removed === true;
    case 'rotateRefreshToken':
      return (result as { kind?: unknown } | null)?.kind !== 'invalid';
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
        let event: AuditEventDraft | undefined;
        const wrapped = args.map((arg) => {
          if (isDraft(arg)) {
            event = arg;
            return arg;
          }
          if (typeof arg !== 'function') return arg;
          return (...inner: unknown[]) => {
            const out = (arg as (...a: unknown[]) => unknown)(...inner);
            if (isDraft(out)) event = out;
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
        if (event !== undefined && committed(prop, result)) metrics.recordAuditEvent(event);
        return result;
      };
    },
  });
}
