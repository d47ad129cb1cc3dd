import { userStatusCommand } from '../user-options.js';

/**
 * `svc auth users enable <SUBJECT>`: `POST /v1/auth/users/:subject/enable`.
 *
 * @example
 * await authUsersEnable.run(['sub_01J...']);
 */
export const authUsersEnable = userStatusCommand(
  'enable',
  'Enable a disabled user: sign-in works again (its revoked sessions stay revoked).',
);
