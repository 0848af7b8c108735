// A batch page reloads itself while there is something to wait for (documents, the workbook).
(function () {
  if (document.body.dataset.waiting === "true") setTimeout(() => location.reload(), 4000);
})();
