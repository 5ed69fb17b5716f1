import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'dist/', '.cache/', 'coverage/'] },
  js.configs.recommended,
  // type-aware rules (docs/decisions.md, "Lint"): each file checked with its own tsconfig (web/ has one)
  ...tseslint.configs.recommendedTypeChecked,
  { languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } } },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
      eqeqeq: ['error', 'always'],
      // fastify plugins and route handlers are async by the framework's contract, awaiting or not
      '@typescript-eslint/require-await': 'off',
      // a Preact event handler may return a promise: the page handles its errors inside (web/)
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
    },
  },
  {
    // tests read answers as JSON (`any`) and check their shape with expect(): typing each adds nothing
    files: ['test/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      // `res.json() as T` names the shape the test expects; json<T>() would say the same
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
    },
  },
  // plain JavaScript (configs) has no types to check
  { files: ['**/*.js', '**/*.mjs', '**/*.cjs'], ...tseslint.configs.disableTypeChecked },
);
