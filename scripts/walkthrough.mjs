// The README walkthrough as a program. README.md is the one source of its commands: every
// `$ ` line of the block between the walkthrough markers is run, in order, in one bash
// session, from the repository root, exactly as written (only the ports are the run's own).
//
//   node scripts/walkthrough.mjs            run it and print the transcript
//   node scripts/walkthrough.mjs --write    run it and put the real output into README.md
//   node scripts/walkthrough.mjs --check    run it and fail when README.md's recorded output
//                                           differs (ids, tokens, keys, times and ports aside)
//
// `--repo DIR` runs another checkout's README (the fresh-clone test uses it). Nothing here
// may reach the npm registry: the run points npm at an unreachable registry, so a missing
// `svc` link fails loudly instead of fetching someone else's package.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const WALK_BEGIN = '<!-- walkthrough:begin -->';
export const WALK_END = '<!-- walkthrough:end -->';
export const QUICK_BEGIN = '<!-- quickstart:begin -->';
export const QUICK_END = '<!-- quickstart:end -->';
/** The ports the README shows; a run uses free ones and prints these back. */
const SHOWN_PORTS = { management: 9090, node: 9091, app: 8080, upstream: 3000 };

function between(text, begin, end) {
  const from = text.indexOf(begin);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`README.md has no ${begin} ... ${end} block`);
  return { from: from + begin.length, to };
}

/**
 * The walkthrough's steps: each `$ ` command with the output README.md records for it and
 * the `# ` narration lines before it.
 *
 * @param {string} readme the text of README.md
 * @returns {{ narration: string[], command: string, output: string[] }[]}
 */
export function parseWalkthrough(readme) {
  const { from, to } = between(readme, WALK_BEGIN, WALK_END);
  const lines = readme.slice(from, to).split('\n');
  const body = lines.slice(
    lines.findIndex((l) => l.startsWith('```')) + 1,
    lines.findLastIndex((l) => l.startsWith('```')),
  );
  const steps = [];
  let narration = [];
  let current = null;
  for (const line of body) {
    if (line.startsWith('$ ')) {
      current = { narration, command: line.slice(2), output: [] };
      steps.push(current);
      narration = [];
    } else if (line.startsWith('# ')) {
      narration.push(line);
      current = null;
    } else if (current !== null) {
      current.output.push(line);
    }
  }
  for (const s of steps) while (s.output.length > 0 && s.output.at(-1) === '') s.output.pop();
  return steps;
}

/**
 * The quick start's commands, without their trailing comments.
 *
 * @param {string} readme
 * @returns {string[]}
 */
export function parseQuickStart(readme) {
  const { from, to } = between(readme, QUICK_BEGIN, QUICK_END);
  return readme
    .slice(from, to)
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('```') && !l.startsWith('#'))
    .map((l) => l.replace(/\s{2,}#.*$/, '').trim());
}

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.on('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

const SEP = '\u001e';

/**
 * Runs every step in one bash session from `repo`, with a scratch HOME and free ports, and
 * returns each step's output (stdout and stderr together, as a terminal shows them) and exit
 * status. A command ending in ` &` runs in the background; its first output is its step's.
 *
 * @param {{ command: string }[]} steps
 * @param {string} repo
 */
export async function runSteps(steps, repo) {
  // The walkthrough creates ./demo; it must not run over (or later delete) a project of yours.
  const project = join(repo, 'demo');
  if (existsSync(project)) throw new Error(`${project} exists; move it away to run the walkthrough (it creates and removes ./demo)`);
  const scratch = mkdtempSync(join(tmpdir(), 'svc-walk-'));
  const ports = { management: await freePort(), node: await freePort(), app: await freePort(), upstream: await freePort() };
  const portOf = (text) =>
    text
      .replaceAll(`127.0.0.1:${SHOWN_PORTS.management}`, `127.0.0.1:${ports.management}`)
      .replaceAll(`127.0.0.1:${SHOWN_PORTS.node}`, `127.0.0.1:${ports.node}`)
      .replaceAll(`127.0.0.1:${SHOWN_PORTS.app}`, `127.0.0.1:${ports.app}`)
      .replaceAll(`127.0.0.1:${SHOWN_PORTS.upstream}`, `127.0.0.1:${ports.upstream}`);
  const script = ['set -m', `cd ${JSON.stringify(repo)}`, "trap 'for j in $(jobs -p); do kill -TERM -- -$j 2>/dev/null; done; wait' EXIT"];
  steps.forEach((step, i) => {
    script.push(`printf '${SEP}%s${SEP}\\n' ${i}`);
    const command = portOf(step.command);
    if (command.endsWith(' &')) {
      const out = join(scratch, `bg-${i}.out`);
      script.push(`{ ${command.slice(0, -2)}\n} </dev/null >${JSON.stringify(out)} 2>${JSON.stringify(`${out}.err`)} &`);
      // Its first lines (the ready lines of a server) are the step's output.
      script.push(`for _ in $(seq 1 600); do [ -s ${JSON.stringify(out)} ] && break; sleep 0.1; done; sleep 1; cat ${JSON.stringify(out)}`);
      script.push(`printf '${SEP}%s:0${SEP}\\n' ${i}`);
    } else {
      script.push(`{ ${command}\n} </dev/null 2>&1`);
      script.push(`printf '\\n${SEP}%s:%s${SEP}\\n' ${i} $?`);
    }
  });
  const home = join(scratch, 'home');
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_') && !k.startsWith('npm_'))),
    HOME: home,
    SVC_MANAGEMENT_LISTEN: `127.0.0.1:${ports.management}`,
    SVC_NODE_LISTEN: `127.0.0.1:${ports.node}`,
    SVC_APP_LISTEN: `127.0.0.1:${ports.app}`,
    SVC_MANAGEMENT_URL: `http://127.0.0.1:${ports.management}`,
    SVC_NODE_URL: `http://127.0.0.1:${ports.node}`,
    // A registry nothing answers on: `npx svc` must find this checkout's own `svc`.
    npm_config_registry: 'http://127.0.0.1:9/',
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
  };
  spawnSync('mkdir', ['-p', home]);
  try {
    const result = spawnSync('bash', ['-c', script.join('\n')], { env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 600_000 });
    if (result.error !== undefined) throw result.error;
    const display = (text) =>
      text
        .replaceAll(`127.0.0.1:${ports.management}`, `127.0.0.1:${SHOWN_PORTS.management}`)
        .replaceAll(`127.0.0.1:${ports.node}`, `127.0.0.1:${SHOWN_PORTS.node}`)
        .replaceAll(`127.0.0.1:${ports.app}`, `127.0.0.1:${SHOWN_PORTS.app}`)
        .replaceAll(`127.0.0.1:${ports.upstream}`, `127.0.0.1:${SHOWN_PORTS.upstream}`)
        .replaceAll(home, '~')
        .replaceAll(repo, '~/svc-auth')
        // This machine's npm configuration, not ours: npm 11 warns about it on every npx.
        .split('\n')
        .filter((l) => !l.startsWith('npm warn Unknown user config'))
        .join('\n');
    const outputs = [];
    const parts = result.stdout.split(new RegExp(`${SEP}(\\d+)(?::(\\d+))?${SEP}\\n`));
    // parts: [before, i, undefined, output, i, status, '', ...]
    for (let k = 1; k + 2 < parts.length; k += 3) {
      const index = Number(parts[k]);
      const status = parts[k + 1];
      if (status === undefined) outputs[index] = { output: display(parts[k + 2] ?? '').replace(/\n+$/, ''), status: null };
      else if (outputs[index] !== undefined) outputs[index].status = Number(status);
    }
    return steps.map((s, i) => ({ command: s.command, output: outputs[i]?.output ?? '', status: outputs[i]?.status ?? null }));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
    rmSync(project, { recursive: true, force: true });
  }
}

/**
 * Output with what differs from run to run (ids, tokens, keys, signatures, times, scratch
 * paths, node ids and pairing codes) replaced by placeholders, so two runs compare equal.
 *
 * @param {string} text
 */
export function normalize(text) {
  // Base64url key material and thumbprints (a JWK's x, its kid) are the 43-character runs.
  return text
    .replace(/\b(dev|ses|sub|chl|int|evt|prj|bst|clu)_[0-9A-HJKMNP-TV-Z]{26}\b/g, '$1_<id>')
    .replace(/\bsvc([abr])_[A-Za-z0-9_-]{20,}/g, 'svc$1_<token>')
    .replace(/\b[0-9a-f]{32,}\b/g, '<hex>')
    .replace(/(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g, '<b64>')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, '<time>')
    .replace(/\b(?:[0-9A-Z]{4}-){8}[0-9A-Z]\b/g, '<node-id>')
    .replace(/\b[0-9A-Z]{4}-[0-9A-Z]{4}\b/g, '<code>')
    .replace(/\b1[0-9]{9}\b/g, '<unix>')
    .replace(/\/tmp\/tmp\.[A-Za-z0-9]+/g, '<tmp>')
    .replace(/\/tmp\/svc-walk-[A-Za-z0-9]+/g, '<tmp>');
}

/**
 * The walkthrough block of README.md rewritten with `results` as the recorded output.
 *
 * @param {string} readme
 * @param {ReturnType<typeof parseWalkthrough>} steps
 * @param {{ output: string }[]} results
 */
export function withOutputs(readme, steps, results) {
  const { from, to } = between(readme, WALK_BEGIN, WALK_END);
  const blocks = steps.map((s, i) => {
    const lines = [...s.narration, `$ ${s.command}`];
    const out = results[i]?.output ?? '';
    if (out !== '') lines.push(out);
    return lines.join('\n');
  });
  return `${readme.slice(0, from)}\n\`\`\`console\n${blocks.join('\n\n')}\n\`\`\`\n${readme.slice(to)}`;
}

/**
 * What differs between README.md's recorded walkthrough and a run: one message per step,
 * none when they agree.
 *
 * @param {ReturnType<typeof parseWalkthrough>} steps
 * @param {{ command: string, output: string, status: number | null }[]} results
 */
export function differences(steps, results) {
  const problems = [];
  steps.forEach((step, i) => {
    const expected = normalize(step.output.join('\n'));
    const actual = normalize(results[i]?.output ?? '');
    if (expected !== actual) {
      problems.push(`step ${i + 1}: $ ${step.command}\n--- README.md\n${expected}\n--- this run\n${actual}`);
    }
  });
  return problems;
}

async function cli() {
  const args = process.argv.slice(2);
  const repoFlag = args.indexOf('--repo');
  const repo = resolve(repoFlag >= 0 ? (args[repoFlag + 1] ?? '.') : new URL('..', import.meta.url).pathname);
  const readmePath = join(repo, 'README.md');
  const readme = readFileSync(readmePath, 'utf8');
  const steps = parseWalkthrough(readme);
  const results = await runSteps(steps, repo);
  if (args.includes('--write')) {
    writeFileSync(readmePath, withOutputs(readme, steps, results));
    console.log(`README.md: ${steps.length} walkthrough steps recorded`);
    return 0;
  }
  if (args.includes('--check')) {
    const problems = differences(steps, results);
    // A quick-start command is walked when it is a step, or one side of a step's pipe.
    const walked = new Set(steps.flatMap((s) => [s.command, ...s.command.split(' | ')].map((c) => c.replace(/ &$/, ''))));
    for (const command of parseQuickStart(readme)) {
      if (command !== 'npm ci' && !walked.has(command)) problems.push(`the quick start's \`${command}\` is not a walkthrough step`);
    }
    if (problems.length > 0) {
      console.error(`README.md walkthrough: ${problems.length} step(s) differ from a real run:\n\n${problems.join('\n\n')}`);
      return 1;
    }
    console.log(`README.md walkthrough: all ${steps.length} steps match a real run`);
    return 0;
  }
  for (const r of results) console.log(`$ ${r.command}${r.output === '' ? '' : `\n${r.output}`}\n`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(await cli());
