// Keep a view in step with what other tabs (or other people) change: call `refresh` when the page is
// looked at again (focus, visibility) and on a slow poll while it is visible. A hidden tab polls nothing.

export function keepFresh(refresh, { everyMs = 15000 } = {}) {
  let pending = 0;
  const soon = () => {
    // Coming back to a tab fires focus and visibilitychange together: one refresh for both.
    if (pending || document.visibilityState !== "visible") return;
    pending = setTimeout(() => {
      pending = 0;
      refresh();
    }, 50);
  };
  window.addEventListener("focus", soon);
  document.addEventListener("visibilitychange", soon);
  const timer = setInterval(soon, everyMs);
  return () => {
    clearInterval(timer);
    clearTimeout(pending);
    window.removeEventListener("focus", soon);
    document.removeEventListener("visibilitychange", soon);
  };
}
