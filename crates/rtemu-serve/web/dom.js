// Small DOM helpers: elements from attributes and children, text that changes only when it
// differs, and elements that open with a click, Enter or Space.

const SVGNS = 'http://www.w3.org/2000/svg';

/** The first element under `root` that matches `sel`. */
export const $ = (sel, root = document) => root.querySelector(sel);

/** An HTML element with attributes and children (strings become text). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

/** An SVG element with attributes and children. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

/** Sets the text of the elements of `root` marked `data-field="FIELD"`, where it differs. */
export function setText(root, field, text) {
  for (const el of root.querySelectorAll(`[data-field="${field}"]`)) {
    if (el.textContent !== text) el.textContent = text;
  }
}

/** Attributes that make an element focusable and open it with a click, Enter or Space;
 * `onOpen(fromKeyboard)`. */
export function focusable(attrs, onOpen) {
  return {
    tabindex: 0,
    role: 'button',
    ...attrs,
    onclick: () => onOpen(false),
    onkeydown: (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        onOpen(true);
      }
    },
  };
}
