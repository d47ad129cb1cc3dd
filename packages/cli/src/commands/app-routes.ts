import { requirementNeeds } from '@svc/core';
import type { AppGatewayConfig, AppPathRequirement } from '@svc/core/config';
import { chosenProfile, loadProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printTable, printText } from '../output.js';

const spec = {
  name: 'svc app routes',
  summary:
    'List the applications behind the gateway (:svc/app-routes, or the one :svc/app-upstream) with their policies, from project.edn.',
  usage: 'svc app routes [PROJECT] [--json]',
  help: [
    '[PROJECT]             the project directory (default: the current directory)',
    '                      reads project.edn only: no service needs to run',
    '--json                print {"mode","routes":[{"from","to","public","requirements":[{"path","subjects","groups",',
    '                      "email_domains","amr","max_auth_age_seconds"}],"audience"}]}; "from" is null for',
    '                      :svc/app-upstream (any Host)',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
  optionalPositionals: 1,
} as const;

/** One application behind the gateway, as `svc app routes` prints it. */
interface RouteView {
  readonly from: string | null;
  readonly to: string;
  readonly public: readonly string[];
  readonly requirements: readonly AppPathRequirement[];
  readonly audience: string;
}

/** The gateway's applications: each route, or the shorthand's one upstream (any `Host`). */
function routeViews(app: AppGatewayConfig): RouteView[] {
  if (app.routes !== undefined) {
    return app.routes.map((r) => ({
      from: r.from,
      to: r.to,
      public: r.publicPaths,
      requirements: r.requirement === null ? [] : [r.requirement],
      audience: r.audience,
    }));
  }
  if (app.upstream === null) return [];
  return [
    { from: null, to: app.upstream, public: app.publicPaths, requirements: app.requirements, audience: app.audience ?? app.upstream },
  ];
}

/** A requirement as JSON: every field, null where it asks nothing. */
function requirementJson(r: AppPathRequirement): object {
  return {
    path: r.path,
    subjects: r.subjects,
    groups: r.groups,
    email_domains: r.emailDomains,
    amr: r.amr,
    max_auth_age_seconds: r.maxAuthAgeSeconds,
  };
}

/** What a route asks beyond being signed in, in words: `a member of ops`; per path for the shorthand's `:svc/app-require`. */
function requirementText(view: RouteView): string {
  if (view.requirements.length === 0) return 'signed in';
  const words = (r: AppPathRequirement) => requirementNeeds(r).join(' and ');
  if (view.from !== null) return words(view.requirements[0] as AppPathRequirement);
  return view.requirements.map((r) => `${r.path}: ${words(r)}`).join('; ');
}

/**
 * `svc app routes [PROJECT]`: the applications the gateway serves, read from `project.edn`
 * (with the chosen profile): for each, the origin (and path) it answers at, the upstream, the
 * public paths, what the other paths require, and the assertion audience.
 *
 * @example
 * await appRoutes.run(['./demo', '--json']);
 */
export const appRoutes: Command = {
  path: ['app', 'routes'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const dir = args.positionals[0] ?? '.';
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    const { app } = project.config;
    const views = routeViews(app);
    const mode = app.routes !== undefined ? 'routes' : app.upstream !== null ? 'upstream' : 'none';
    if (args.values.json === true) {
      printJson({
        mode,
        routes: views.map((v) => ({
          from: v.from,
          to: v.to,
          public: v.public,
          requirements: v.requirements.map(requirementJson),
          audience: v.audience,
        })),
      });
      return 0;
    }
    if (views.length === 0) {
      printText(
        'no routes: neither :svc/app-routes nor :svc/app-upstream is set in project.edn (the gateway serves :svc/app modules, or only its own /.svc/ routes)',
      );
      return 0;
    }
    printTable(
      ['FROM', 'TO', 'PUBLIC', 'REQUIRES', 'AUDIENCE'],
      views.map((v) => [v.from ?? '* (any host)', v.to, v.public.length === 0 ? '-' : v.public.join(' '), requirementText(v), v.audience]),
    );
    return 0;
  },
};
