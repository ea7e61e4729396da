"""Tools for users of the library, outside a build: `explain` (why is a temporary kept),
`census` (how much of a set of programs the library reaches, and `--determinism`), the
eager-evaluation table, program discovery, and side-by-side stock/library builds
(`compare`). They may import the glue (`integration`) and everything below it, never
`measure`."""
