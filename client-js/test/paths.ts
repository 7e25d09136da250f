/** The repository's shared vectors (tests/vectors/), from the compiled tests in dist/test/. */
export const VECTORS = new URL("../../../tests/vectors/", import.meta.url);
