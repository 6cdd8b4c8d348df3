// The book's one accessibility fix to its theme, found by axe-core (solutions/tests/book/test_a11y.py, rule
// "region"): on a wide screen the primary sidebar shows the book's title and the search button outside every
// landmark, so a screen reader's list of landmarks skips them. The sidebar is the book's navigation: say so.
document.addEventListener("DOMContentLoaded", () => {
  const sidebar = document.getElementById("pst-primary-sidebar");
  if (sidebar && !sidebar.hasAttribute("role")) {
    sidebar.setAttribute("role", "navigation");
    sidebar.setAttribute("aria-label", "Book");
  }
});
