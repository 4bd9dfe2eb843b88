// A small Markdown renderer for the kit's prompts on the candidate's page: headings, paragraphs,
// fenced code, tables, lists (nested by indentation), `code`, **strong** and *emphasis*.
// It builds DOM nodes with el() from text only (never innerHTML), so whatever a line holds,
// tags included, shows as text: nothing in the text can become markup or run.
"use strict";
const Markdown = (() => {
  const FENCE = /^\s*(`{3,}|~{3,})\s*([\w+.-]*)\s*$/;
  const HEADING = /^(#{1,6})\s+(.*?)(\s+#+)?\s*$/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])\s+(.*)$/;
  const RULE = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;
  const ROW = /^\s*\|.*\|\s*$/;
  const INLINE = new RegExp([
    "\\\\([\\\\`*_{}\\[\\]()#+\\-.!|<>])",  // 1: an escaped character, as itself
    "(`+)([^`][\\s\\S]*?)\\2(?!`)",  // 2, 3: a code span
    "\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*",  // 4: strong
    "__(?=\\S)([\\s\\S]*?\\S)__(?!\\w)",  // 5: strong
    "\\*(?=[^\\s*])([\\s\\S]*?[^\\s*])\\*",  // 6: emphasis
    "(?<!\\w)_(?=[^\\s_])([\\s\\S]*?[^\\s_])_(?!\\w)",  // 7: emphasis, never inside a_word_like_this
  ].join("|"), "g");

  const indentOf = (line) => line.length - line.trimStart().length;
  const isRow = (lines, i) => ROW.test(lines[i]) && i + 1 < lines.length && RULE.test(lines[i + 1]);
  const startsBlock = (lines, i) => FENCE.test(lines[i]) || HEADING.test(lines[i]) || ITEM.test(lines[i])
                                    || isRow(lines, i);

  function inline(text) {
    const out = [];
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) out.push(text.slice(last, m.index));
      if (m[1] !== undefined) out.push(m[1]);
      else if (m[3] !== undefined) out.push(el("code", {}, m[3].replace(/^ ([\s\S]*) $/, "$1")));
      else if (m[4] !== undefined || m[5] !== undefined) out.push(el("strong", {}, inline(m[4] ?? m[5])));
      else out.push(el("em", {}, inline(m[6] ?? m[7])));
      last = m.index + m[0].length;
    }
    if (last < text.length) out.push(text.slice(last));
    return out;
  }

  function cells(line) {
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  }

  function table(lines, i) {
    const head = cells(lines[i]), rows = [];
    for (i += 2; i < lines.length && ROW.test(lines[i]); i++) rows.push(cells(lines[i]));
    const row = (cellsOf, tag) => el("tr", {}, head.map((_, k) => el(tag, {}, inline(cellsOf[k] ?? ""))));
    return [el("table", {class: "md-table"}, el("thead", {}, row(head, "th")),
               el("tbody", {}, rows.map((r) => row(r, "td")))), i];
  }

  function list(lines, i) {
    const first = ITEM.exec(lines[i]), indent = first[1].length, ordered = /\d/.test(first[2]);
    const node = el(ordered ? "ol" : "ul", ordered && parseInt(first[2], 10) !== 1 ? {start: parseInt(first[2], 10)} : {});
    while (i < lines.length) {
      const m = ITEM.exec(lines[i]);
      if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
      const offset = m[0].length - m[3].length, body = [m[3]];
      const dedent = (line) => line.replace(new RegExp(`^ {0,${offset}}`), "");
      for (i++; i < lines.length; i++) {
        const line = lines[i];
        if (!line.trim()) {  // a blank line: the item goes on only if what follows is indented under it
          let j = i;
          while (j < lines.length && !lines[j].trim()) j++;
          if (j < lines.length && indentOf(lines[j]) > indent) { body.push(...lines.slice(i, j).map(() => "")); i = j - 1; continue; }
          break;
        }
        const sub = ITEM.exec(line);
        if (sub && sub[1].length <= indent) break;
        if (indentOf(line) > indent) body.push(dedent(line));
        else if (body[body.length - 1].trim() && !startsBlock(lines, i)) body.push(line.trimStart());  // a lazy line
        else break;
      }
      node.append(el("li", {}, blocks(body)));
    }
    return [node, i];
  }

  function blocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (!line.trim()) {
        i++;
      } else if ((m = FENCE.exec(line))) {
        const body = [], indent = indentOf(line);
        for (i++; i < lines.length && !lines[i].trim().startsWith(m[1]); i++) {
          body.push(lines[i].replace(new RegExp(`^ {0,${indent}}`), ""));
        }
        i++;
        out.push(el("pre", {class: "md-code"}, el("code", m[2] ? {"data-lang": m[2]} : {}, body.join("\n"))));
      } else if ((m = HEADING.exec(line))) {
        out.push(el(`h${Math.min(6, m[1].length + 2)}`, {}, inline(m[2])));  // under the page's h2
        i++;
      } else if (isRow(lines, i)) {
        const [node, next] = table(lines, i);
        out.push(node);
        i = next;
      } else if (ITEM.test(line)) {
        const [node, next] = list(lines, i);
        out.push(node);
        i = next;
      } else {
        const text = [line.trim()];
        for (i++; i < lines.length && lines[i].trim() && !startsBlock(lines, i); i++) text.push(lines[i].trim());
        out.push(el("p", {}, inline(text.join("\n"))));
      }
    }
    return out;
  }

  return {render: (text) => el("div", {class: "md"}, blocks(String(text).replace(/\r\n?/g, "\n").split("\n")))};
})();
