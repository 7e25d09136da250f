// The attribute picker of a breakdown page: rows and columns are two different attributes,
// so picking the other select's attribute swaps the two (without this script the page
// answers a 400 naming `columns` for the same attribute twice).
document.querySelectorAll("form[data-pair]").forEach(function (form) {
  var rows = form.elements.namedItem("rows");
  var columns = form.elements.namedItem("columns");
  var previous = { rows: rows.value, columns: columns.value };
  form.addEventListener("change", function (event) {
    var box = event.target;
    if (box !== rows && box !== columns) return;
    var other = box === rows ? columns : rows;
    if (box.value === other.value) other.value = previous[box.name];
    previous = { rows: rows.value, columns: columns.value };
  });
});
