/**
 * Delivery at the end (client/lifecycle.py): on page hide in browsers (fetch keepalive), at
 * the event loop's end in Node, through one shared `beforeExit` listener for every live
 * Reporter (one each would trip Node's MaxListeners warning past 10), removed when the last
 * Reporter closes.
 */

/** Attach `onHide` (browsers: the page is hidden) or `onExit` (Node: the event loop ends;
 * once); returns what detaches them. */
export function attachExitHooks(onHide: () => void, onExit: () => void): (() => void)[] {
  if (typeof document !== "undefined" && typeof addEventListener === "function") {
    // Page hide: what is spooled goes out with fetch keepalive, which outlives the page
    // (each body within its 64 KiB limit); the rest stays in IndexedDB for the next visit.
    const onVisibility = (): void => {
      if (document.visibilityState === "hidden") onHide();
    };
    const onPageHide = (): void => onHide();
    document.addEventListener("visibilitychange", onVisibility);
    addEventListener("pagehide", onPageHide);
    return [() => document.removeEventListener("visibilitychange", onVisibility), () => removeEventListener("pagehide", onPageHide)];
  }
  if (typeof process !== "undefined" && typeof process.once === "function") {
    // Node: at the event loop's end, deliver what is spooled (once).
    atExit(onExit);
    return [() => cancelAtExit(onExit)];
  }
  return [];
}

const exitHooks = new Set<() => void>();

function runExitHooks(): void {
  const hooks = [...exitHooks];
  exitHooks.clear(); // each hook runs once, as with process.once
  process.removeListener("beforeExit", runExitHooks);
  for (const hook of hooks) hook();
}

function atExit(hook: () => void): void {
  if (exitHooks.size === 0) process.on("beforeExit", runExitHooks);
  exitHooks.add(hook);
}

function cancelAtExit(hook: () => void): void {
  if (exitHooks.delete(hook) && exitHooks.size === 0) {
    process.removeListener("beforeExit", runExitHooks);
  }
}
