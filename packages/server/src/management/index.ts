export { buildManagementApp, type ManagementAppOptions } from './app.js';
export {
  DEFAULT_MANAGEMENT_LISTEN,
  ListenAddressError,
  MANAGEMENT_LISTEN_ENV,
  parseListenAddress,
  resolveManagementListen,
} from './listen-address.js';
export { AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX } from './operator-routes.js';
