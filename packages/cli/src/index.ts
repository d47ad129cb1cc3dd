export { CliError, EXIT, UsageError } from './cli-error.js';
export { COMMANDS } from './commands/index.js';
export { resolveSecret } from './control.js';
export { parseEdn } from './edn.js';
export { main, VERSION } from './main.js';
export { defaultProjectEdn, loadProject, type Project, projectNameFor } from './project.js';
