import type { Command } from '../command.js';
import { authAudit } from './auth-audit.js';
import { authAuditVerify } from './auth-audit-verify.js';
import { authDevices } from './auth-devices.js';
import { authDevicesRemove } from './auth-devices-remove.js';
import { authEnroll } from './auth-enroll.js';
import { authInit } from './auth-init.js';
import { authKeygen } from './auth-keygen.js';
import { authLogin } from './auth-login.js';
import { authLogout } from './auth-logout.js';
import { authPair } from './auth-pair.js';
import { authPairComplete } from './auth-pair-complete.js';
import { authPubkey } from './auth-pubkey.js';
import { authRefresh } from './auth-refresh.js';
import { authServe } from './auth-serve.js';
import { authSessions } from './auth-sessions.js';
import { authSessionsRevoke } from './auth-sessions-revoke.js';
import { authWhoami } from './auth-whoami.js';
import { nodeServe } from './node-serve.js';
import { packageInstall } from './package-install.js';
import { serve } from './serve.js';

/** Every command of `svc`, in the order `svc --help` lists them. */
export const COMMANDS: readonly Command[] = [
  authInit,
  authEnroll,
  authServe,
  serve,
  nodeServe,
  authKeygen,
  authPubkey,
  authLogin,
  authWhoami,
  authRefresh,
  authLogout,
  authDevices,
  authDevicesRemove,
  authSessions,
  authSessionsRevoke,
  authAudit,
  authAuditVerify,
  authPair,
  authPairComplete,
  packageInstall,
];
