"""The passage viewer: what a citation's signed link opens (``/v1/files/{file_id}/view``).

``passage.py`` gathers what to show (the passage, the quote's offsets in it, its heading path, the page
and where the quote stands on it); ``pdf_page.py`` renders a PDF page and finds the quote's boxes on it;
``html_page.py`` writes the page, escaping everything (the passage and the quote are user content).
"""
