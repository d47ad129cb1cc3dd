import { createLogger, type ListenerName, openService, type Service, type ServiceOptions } from '@svc/runtime';
import { CliError } from './cli-error.js';
import { listenRefusal } from './listen.js';
import { printLine } from './output.js';
import { VERSION } from './version.js';

/** The line printed on stdout once a listener is up (tests and scripts parse it). */
const READY: Readonly<Record<ListenerName, (url: string) => string>> = {
  management: (url) => `svc auth: management API listening on ${url}`,
  node: (url) => `svc node: node surface listening on ${url}`,
  application: (url) => `svc app: application gateway listening on ${url}`,
  metrics: (url) => `svc: metrics listening on ${url}/metrics`,
};

/**
 * Runs a project's service in the foreground until SIGINT or SIGTERM: opens it with the
 * runtime, checks it with `check` (e.g. that the listener the command is for is on), starts it,
 * prints each listener's ready line, reloads on SIGHUP when it has something to reload, and on a
 * signal stops it and resolves to exit code 0. A second signal exits at once.
 *
 * @example
 * return runService('svc node serve', dir, { listeners: ['node'], listen: { node: flag }, listenFlags: { node: '--listen' } });
 */
export async function runService(
  command: string,
  dir: string,
  options: Omit<ServiceOptions, 'logger' | 'onNotice' | 'version'>,
  check: (service: Service) => void = () => undefined,
): Promise<number> {
  const log = createLogger({ env: process.env, fallback: 'info' });
  let service: Service;
  try {
    service = await openService(dir, {
      ...options,
      logger: log,
      version: VERSION,
      onNotice: (text) => process.stderr.write(`svc: ${text}\n`),
    });
  } catch (error) {
    throw listenRefusal(error, command);
  }
  check(service);
  await service.start();
  let stopping = false;
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
  // Only when there is something to reload: otherwise SIGHUP keeps its default (the terminal went away).
  if (service.reloadable) process.on('SIGHUP', () => service.reload());
  for (const [name, url] of Object.entries(service.addresses)) printLine(READY[name as ListenerName](url));
  const signal = await signalled;
  log.info({ event: 'shutdown', signal }, 'shutting down');
  await service.stop();
  log.info({ event: 'stopped' }, 'stopped');
  return 0;
}

/**
 * Refuses a service without `listener`: the command is that listener's server, and `off` (from
 * its variable or `project.edn`) only disables it inside `svc serve`.
 *
 * @example
 * runService('svc app serve', dir, opts, requireListener('application', '...cannot be turned off...'));
 */
export function requireListener(listener: ListenerName, message: string): (service: Service) => void {
  return (service) => {
    if (!service.listening.includes(listener)) throw new CliError(message);
  };
}
