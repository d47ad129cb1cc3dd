/**
 * The one rule of what makes a node unhealthy, for every probe that decides it: `/readyz` of
 * the metrics listener applies it, and the container HEALTHCHECK (`docs/docker/healthcheck.mjs`,
 * which cannot import this package) mirrors it over node health's body; a test feeds both the
 * same cases.
 */

/** What the rule reads: node health's facts (its JSON body has exactly these). */
export interface NodeHealthFacts {
  readonly store: { readonly status: 'ok' | 'failed' };
  /** Absent when no audit sink is configured. */
  readonly audit_shipping?: { readonly status: 'ok' | 'failed' } | undefined;
  readonly providers: readonly { readonly name: string; readonly kind: string; readonly status: 'ok' | 'failed' }[];
}

/** The verdict: which of the node's own parts failed, and which outside dependencies did. */
export interface NodeHealthVerdict {
  /** True when none of the node's own parts failed. */
  readonly healthy: boolean;
  /** The node's own failed parts: `store`, `audit_shipping`, `provider <name>` (a built-in device-key provider). */
  readonly failed: readonly string[];
  /** Provider packages reporting failed: usually an outside outage (their IdP), never a reason to restart or reroute this node. */
  readonly outside: readonly string[];
}

/** The kind of the built-in provider that checks device signatures: its failure is the node's own. */
export const DEVICE_KEY_PROVIDER_KIND = 'device-key';

/**
 * Whether this node can do its job: it is unhealthy when its control store fails, when audit
 * shipping is stalled (the audit copy is part of its job), or when a device-key provider (the
 * built-in Ed25519 check, run in-process) fails. A provider package that fails (a passkey or
 * OIDC provider whose IdP is down) is an outside outage: restarting or rerouting this node
 * would not bring it back, so it is reported, never a reason to be unhealthy.
 *
 * @example
 * nodeHealthVerdict({ store: { status: 'ok' }, providers: [{ name: 'corp-sso', kind: 'oidc', status: 'failed' }] });
 * // { healthy: true, failed: [], outside: ['corp-sso'] }
 */
export function nodeHealthVerdict(facts: NodeHealthFacts): NodeHealthVerdict {
  const failed: string[] = [];
  const outside: string[] = [];
  if (facts.store.status !== 'ok') failed.push('store');
  if (facts.audit_shipping !== undefined && facts.audit_shipping.status !== 'ok') failed.push('audit_shipping');
  for (const p of facts.providers) {
    if (p.status === 'ok') continue;
    if (p.kind === DEVICE_KEY_PROVIDER_KIND) failed.push(`provider ${p.name}`);
    else outside.push(p.name);
  }
  return { healthy: failed.length === 0, failed, outside };
}
