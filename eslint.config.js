// Lint: the recommended rules of ESLint and typescript-eslint; type errors are tsc's job.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** The dashboard's script, which the page inlines (src/service/observe/dashboard-page.ts). */
const BROWSER_SCRIPTS = ['src/service/observe/assets/**/*.js'];

export default tseslint.config(
  { ignores: ['dist/', 'dist-cjs/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: 'error',
    },
  },
  {
    ignores: BROWSER_SCRIPTS,
    languageOptions: { globals: { ...globals.node } },
  },
  {
    // It runs in the browser, as a classic script (inline in the page, not a module).
    files: BROWSER_SCRIPTS,
    languageOptions: { sourceType: 'script', globals: { ...globals.browser } },
  },
);
