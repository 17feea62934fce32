"""The SkriptND language server (`sknd lsp`): diagnostics, hover, go-to-definition, references,
completion, outline and formatting for editors.

- `workspace`: open documents, their analyses (programs loaded with unsaved buffers) and checks
- `incremental`: the incremental parser that keeps re-checks of large modules fast
- `locate`: what is under the cursor (AST nodes, words, symbols)
- `features`: the LSP features as functions of a workspace and a position
- `server`: the pygls wiring (`main` runs it over stdio)
"""
