import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '.stryker-tmp/**',
      'reports/**',
      'packages/protocol/schema/**',
      'examples/par/project/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // The inspector page runs in the browser.
    files: ['packages/inspector/static/**/*.js'],
    languageOptions: { globals: { ...globals.browser }, sourceType: 'script' },
  },
  {
    // The process boundary (DESIGN §3): orchestrator and agents share only the protocol.
    files: ['packages/orchestrator/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@polish/agents', '@polish/agents/*', '../../agents/*'],
              message:
                'The orchestrator must not import agents: only @polish/protocol crosses the boundary. Put shared types in protocol.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['packages/agents/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@polish/orchestrator', '@polish/orchestrator/*', '../../orchestrator/*'],
              message:
                'Agents must not import the orchestrator: only @polish/protocol crosses the boundary. Put shared types in protocol.',
            },
          ],
        },
      ],
    },
  },
);
