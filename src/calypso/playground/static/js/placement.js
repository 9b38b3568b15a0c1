// Where a citation popover goes: never over the answer text it explains, always inside the viewport.
// Wide pages: in the margin beside the answer, level with the badge (right, else left). Narrow pages:
// under the cited sentence, else above it. All rectangles are the viewport's (getBoundingClientRect).

const GAP = 8; // between the popover and what it must not cover, and from the viewport's edges
const MIN_WIDTH = 280; // narrower than this, a passage does not read: go under the sentence instead
const MAX_WIDTH = 480;

/**
 * ``text``: the answer's box; ``cited``: the box of the sentence the badge ends (with the badge);
 * ``viewport``: {width, height}; ``measure(width)``: the popover's height at that width.
 * Returns {left, top, width, maxHeight, side} in viewport coordinates; a popover taller than the room
 * it gets scrolls inside (maxHeight) rather than spill over the sentence or out of the viewport.
 */
export function placePopover({ text, cited, viewport, measure }) {
  const right = viewport.width - text.right - 2 * GAP;
  const left = text.left - 2 * GAP;
  if (Math.max(right, left) >= MIN_WIDTH) {
    const side = right >= MIN_WIDTH ? "right" : "left";
    const width = Math.min(MAX_WIDTH, side === "right" ? right : left);
    const maxHeight = viewport.height - 2 * GAP;
    const height = Math.min(measure(width), maxHeight);
    const top = Math.min(Math.max(GAP, cited.top - GAP), viewport.height - height - GAP);
    const x = side === "right" ? text.right + GAP : text.left - GAP - width;
    return { left: x, top, width, maxHeight, side };
  }
  const width = Math.min(MAX_WIDTH, viewport.width - 2 * GAP);
  const height = measure(width);
  const x = Math.min(Math.max(GAP, cited.left), viewport.width - width - GAP);
  const below = viewport.height - cited.bottom - 2 * GAP;
  const above = cited.top - 2 * GAP;
  if (below >= height || below >= above) return { left: x, top: cited.bottom + GAP, width, maxHeight: below, side: "below" };
  return { left: x, top: cited.top - GAP - Math.min(height, above), width, maxHeight: above, side: "above" };
}

/** The box of the sentence a badge ends: from the previous badge group (or the answer's start) to it. */
export function citedBox(badge, container) {
  const range = document.createRange();
  const group = badge.closest(".badges") || badge;
  const previous = [...container.querySelectorAll(".badges")].filter(
    (other) => other.compareDocumentPosition(group) & Node.DOCUMENT_POSITION_FOLLOWING,
  ).pop();
  if (previous) range.setStartAfter(previous);
  else range.setStart(container, 0);
  range.setEndAfter(group);
  const boxes = [...range.getClientRects()].filter((box) => box.width && box.height);
  const box = badge.getBoundingClientRect();
  return boxes.reduce((all, one) => ({
    left: Math.min(all.left, one.left), top: Math.min(all.top, one.top),
    right: Math.max(all.right, one.right), bottom: Math.max(all.bottom, one.bottom),
  }), { left: box.left, top: box.top, right: box.right, bottom: box.bottom });
}
