/** The names of the admin commands, apart from their code: the CLI's dispatch loads a command's module only when it runs. */
export const ADMIN_COMMANDS = ['check', 'rules', 'keys', 'usage', 'overrides'] as const;
export type AdminCommand = (typeof ADMIN_COMMANDS)[number];
