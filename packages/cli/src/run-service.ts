import {
  createLogger,
  type ListenerName,
  ListenRefusedError,
  openService,
  resolveListen,
  type Service,
  type ServiceOptions,
} from '@svc/runtime';
import { CliError } from './cli-error.js';
import { runEnv } from './io.js';
import { listenRefusal } from './listen.js';
import { printError, printLine } from './output.js';
import { VERSION } from './version.js';

/** The line printed on stdout once a listener is up (tests and scripts parse it). */
const READY: Readonly<Record<ListenerName, (url: string) => string>> = {
  management: (url) => `svc auth: management API listening on ${url}`,
  node: (url) => `svc node: node surface listening on ${url}`,
  application: (url) => `svc app: application gateway listening on ${url}`,
  metrics: (url) => `svc: metrics listening on ${url}/metrics`,
};

/** What a serve command asks of {@link runService}. */
export interface RunServiceOptions extends Omit<ServiceOptions, 'logger' | 'onNotice' | 'version' | 'env'> {
  /** The listener the command is the server of, with what to say when it resolves to `off`. */
  readonly required?: { readonly listener: ListenerName; readonly offMessage: string };
  /** A check of the opened service before it starts (e.g. that something is left to serve). */
  readonly check?: (service: Service) => void;
}

/**
 * Runs a project's service in the foreground until SIGINT or SIGTERM: checks the management
 * address first (it needs no project: a refused or `off` one is reported before the project is
 * read), opens the service with the runtime, starts it, prints each listener's ready line,
 * reloads on SIGHUP when it has something to reload, and on a signal stops it and resolves to
 * exit code 0. A second signal exits at once.
 *
 * @example
 * return runService('svc node serve', dir, { listeners: ['node'], listen: { node: flag }, listenFlags: { node: '--listen' } });
 */
export async function runService(command: string, dir: string, options: RunServiceOptions): Promise<number> {
  const env = runEnv();
  const { required, check, ...opened } = options;
  let listen = opened.listen;
  let listeners = opened.listeners;
  if ((listeners ?? ['management']).includes('management')) {
    const given = listen?.management;
    let management: ReturnType<typeof resolveListen>;
    try {
      management = typeof given === 'object' ? given : resolveListen('management', { given, env });
    } catch (error) {
      throw listenRefusal(new ListenRefusedError('management', given !== undefined, error as Error), command);
    }
    if (management === 'off' && required?.listener === 'management') throw new CliError(required.offMessage);
    listen = { ...listen, management: management === 'off' ? undefined : management };
    if (management === 'off') listeners = (listeners ?? ['management', 'node', 'application', 'metrics']).filter((l) => l !== 'management');
  }
  const log = createLogger({ env, fallback: 'info' });
  let service: Service;
  try {
    service = await openService(dir, {
      ...opened,
      ...(listeners === undefined ? {} : { listeners }),
      ...(listen === undefined ? {} : { listen }),
      env,
      logger: log,
      version: VERSION,
      onNotice: (text) => printError(`svc: ${text}`),
    });
  } catch (error) {
    throw listenRefusal(error, command);
  }
  if (required !== undefined && !service.listening.includes(required.listener)) throw new CliError(required.offMessage);
  check?.(service);
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
