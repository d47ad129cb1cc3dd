import { userStatusCommand } from '../user-options.js';

/**
 * `svc auth users disable <SUBJECT>`: `POST /v1/auth/users/:subject/disable`.
 *
 * @example
 * await authUsersDisable.run(['sub_01J...']);
 */
export const authUsersDisable = userStatusCommand(
  'disable',
  'Disable a user: refuse its sign-ins and revoke all its sessions at once, on every node (audited; refuses the last management user).',
);
