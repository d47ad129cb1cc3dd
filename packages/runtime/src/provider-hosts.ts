import { relative } from 'node:path';
import type { ProviderHandle } from '@svc/core';
import { providerSettingsJson } from '@svc/core/config';
import { startProviderHost } from '@svc/provider-host';
import type { Logger } from 'pino';
import { dependenciesDir, resolveSecret } from './control.js';
import { RuntimeError } from './errors.js';
import type { VerifiedProviderModule } from './provider-packages.js';

/**
 * Starts one confined process per verified provider module (`startProviderHost`: Node's
 * permission model, reads only in its package and dependency directories, nothing of the
 * service loaded), in `project.edn` order. Its configuration goes over the pipe with its
 * secret references resolved here, never in a process's arguments or environment. A provider
 * that refuses its configuration or fails to load stops the start with one line naming the
 * module; the ones already started are closed.
 *
 * @example
 * const providers = await startProviderHosts(await verifyProviderModules(project), log);
 */
export async function startProviderHosts(
  modules: readonly VerifiedProviderModule[],
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ProviderHandle[]> {
  const handles: ProviderHandle[] = [];
  try {
    for (const { module, verified } of modules) {
      let config: ReturnType<typeof providerSettingsJson>;
      try {
        config = providerSettingsJson(module.settings, (ref) => resolveSecret(ref, env));
      } catch (error) {
        throw new RuntimeError(`provider :${module.alias}: ${(error as Error).message}`, { cause: error });
      }
      try {
        handles.push(
          await startProviderHost({
            name: module.alias,
            packageDir: verified.packageDir,
            entry: `./${relative(verified.packageDir, verified.entry).split('\\').join('/')}`,
            exportName: verified.exportName,
            dependencyDirs: verified.dependencyDirs,
            sharedDependencies: dependenciesDir(),
            config,
            policy: module.policy,
            packageName: verified.name,
            packageVersion: verified.version,
            signer: verified.signer.name,
            signerKey: verified.signer.publicKey,
            log,
          }),
        );
      } catch (error) {
        throw new RuntimeError(
          `provider :${module.alias} (${verified.name}@${verified.version}) did not start: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
      }
      log.info(
        {
          event: 'provider.started',
          provider: module.alias,
          package: `${verified.name}@${verified.version}`,
          signer: verified.signer.name,
        },
        'provider started (confined)',
      );
    }
  } catch (error) {
    await Promise.all(handles.map((h) => h.close().catch(() => undefined)));
    throw error;
  }
  return handles;
}
