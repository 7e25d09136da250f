// Live filtering of the item rows while typing (the search also works without it: submit).
document.querySelectorAll("input[data-filter]").forEach(function (box) {
  var rows = document.querySelectorAll(box.dataset.filter + " tbody tr");
  box.addEventListener("input", function () {
    var text = box.value.toLowerCase();
    rows.forEach(function (row) {
      row.hidden = text !== "" && row.dataset.item.toLowerCase().indexOf(text) < 0;
    });
  });
});
