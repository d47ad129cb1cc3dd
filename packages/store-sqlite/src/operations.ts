/**
 * The operation set this store implements, as the addon declares it. Written out rather than
 * re-exported from core on purpose: addon verification compares the two, and a test keeps
 * them equal and checks that each one is a method of {@link SqliteStore}.
 */
export const SQLITE_STORE_OPERATIONS: readonly string[] = Object.freeze([
  'ping',
  'close',
  'getProject',
  'initProject',
  'issueBootstrapToken',
  'consumeBootstrapToken',
  'enrollDevice',
  'findDeviceByPublicKey',
  'getDevice',
  'listDevices',
  'countDevices',
  'removeDevice',
  'createChallenge',
  'consumeChallenge',
  'createSession',
  'findSessionByAccessDigest',
  'getSession',
  'listActiveSessions',
  'rotateRefreshToken',
  'revokeSession',
  'pruneRetiredRefreshTokens',
  'appendAuditEvent',
  'listAuditEvents',
  'auditHead',
  'createPairingIntent',
  'getPairingIntent',
  'recordPairingFailure',
  'completePairing',
  'stats',
]);
