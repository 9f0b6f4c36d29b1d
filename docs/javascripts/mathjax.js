// MathJax for the math that pymdownx.arithmatex marks (generic mode): \( \) inline and
// \[ \] display, typeset only inside its spans and divs.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
