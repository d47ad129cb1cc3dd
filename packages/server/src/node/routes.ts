/** The version segment of every node route but discovery. */
export const NODE_API_VERSION = '0-alpha';

/** The paths of the node HTTP surface. */
export const NODE_PATHS = Object.freeze({
  discovery: '/.well-known/edge',
  health: `/edge/${NODE_API_VERSION}/health`,
  status: `/edge/${NODE_API_VERSION}/status`,
  diagnostics: `/edge/${NODE_API_VERSION}/diagnostics`,
  pairingPrepare: `/edge/${NODE_API_VERSION}/pairing/prepare`,
  pairingComplete: `/edge/${NODE_API_VERSION}/pairing/complete`,
} as const);

/** How a node route is authorised. */
export type NodeRouteAuth = 'public' | 'management_bearer' | 'pairing_code_and_signature';

/** A route of the node surface, as discovery advertises it. */
export interface NodeRoute {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly auth: NodeRouteAuth;
}

/**
 * Every route of the node HTTP surface, exactly as discovery advertises them. `buildNodeApp`
 * checks that the routes it installed are these and no others, so the list cannot drift. No
 * semantic-kernel routes exist, so none is listed.
 */
export const NODE_ROUTES: readonly NodeRoute[] = Object.freeze(
  (
    [
      { method: 'GET', path: NODE_PATHS.discovery, auth: 'public' },
      { method: 'GET', path: NODE_PATHS.health, auth: 'public' },
      { method: 'GET', path: NODE_PATHS.status, auth: 'management_bearer' },
      { method: 'POST', path: NODE_PATHS.diagnostics, auth: 'management_bearer' },
      { method: 'POST', path: NODE_PATHS.pairingPrepare, auth: 'management_bearer' },
      { method: 'POST', path: NODE_PATHS.pairingComplete, auth: 'pairing_code_and_signature' },
    ] as const
  ).map((r) => Object.freeze({ ...r })),
);
