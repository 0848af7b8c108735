"""What analysts take away: the workbook, the meta-analysis CSV, and closing a batch with its workbook."""
