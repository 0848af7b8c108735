"""Hostile PDFs, written byte by byte: small files that cost a reader minutes or gigabytes.

Each is a well-formed PDF (a correct cross-reference table) so the reader does real work on it
rather than refusing it as damaged:
- ``nested_xobjects``: drawings that draw the drawing below them ``fanout`` times, ``levels`` deep
  (fanout ** levels text draws from a few kilobytes);
- ``compressed_content``: a page whose content stream inflates to ``megabytes`` of text drawing;
- ``page_count``: a page tree that lists one page object ``pages`` times (a tree of shared nodes);
- ``deep_nesting``: an array nested ``depth`` levels deep in the page dictionary;
- ``flate_image``, ``jbig2_image``, ``jpx_image``: a page with a text line and an image that
  declares ``side`` × ``side`` pixels and decodes to gigabytes (zlib, JBIG2 and JPEG 2000).
The image bombs have text, so they pass registration and meet the reader when a page is drawn.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

TEXT = b"BT /F1 12 Tf 72 720 Td (Results of a randomized trial) Tj ET\n"
FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (object 1 is the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"", *, compress: bool = False) -> bytes:
    if compress:
        data, extra = zlib.compress(data, 9), extra + b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _one_page(content: bytes, resources: bytes, extra_objects: list[bytes], page_extra: bytes = b"") -> bytes:
    """Catalog, pages, one page (objects 1-3), its content (4), the font (5), then ``extra_objects``."""
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources %s%s >>"
            % (resources, page_extra),
            content,
            FONT,
            *extra_objects,
        ]
    )


def nested_xobjects(directory: Path, levels: int = 12, fanout: int = 10) -> Path:
    form = b" /Type /XObject /Subtype /Form /BBox [0 0 612 792]"
    forms = [_stream(TEXT, form + b" /Resources << /Font << /F1 5 0 R >> >>")]
    for level in range(1, levels + 1):
        below = 6 + level - 1  # object number of the form one level down
        draws = b"q /X Do Q\n" * fanout
        forms.append(
            _stream(
                draws,
                form + b" /Resources << /XObject << /X %d 0 R >> >>" % below,
            )
        )
    top = 6 + levels
    data = _one_page(_stream(b"q /X Do Q\n"), b"<< /XObject << /X %d 0 R >> >>" % top, forms)
    return _write(directory, "nested-xobjects.pdf", data)


def compressed_content(directory: Path, megabytes: int = 400) -> Path:
    line = b"BT /F1 1 Tf 10 10 Td (0123456789abcdefghijklmnopqrstuvwxyz) Tj ET\n"
    compressor = zlib.compressobj(9)
    block = line * (1024 * 1024 // len(line))
    packed = b"".join(compressor.compress(block) for _ in range(megabytes)) + compressor.flush()
    content = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream"
    return _write(directory, "compressed-content.pdf", _one_page(content, b"<< /Font << /F1 5 0 R >> >>", []))


def page_count(directory: Path, pages: int = 200_000) -> Path:
    """``pages`` blank pages sharing one content stream, in a flat page tree (about 100 bytes each)."""
    first = 5
    kids = b" ".join(b"%d 0 R" % (first + n) for n in range(pages))
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
        b" /Resources << /Font << /F1 4 0 R >> >> >>"
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _stream(b""),
        FONT,
        *([page] * pages),
    ]
    return _write(directory, "page-count.pdf", _pdf(objects))


def deep_nesting(directory: Path, depth: int = 200_000) -> Path:
    nested = b"[" * depth + b"]" * depth
    data = _one_page(_stream(TEXT), b"<< /Font << /F1 5 0 R >> >>", [], page_extra=b" /Nested " + nested)
    return _write(directory, "deep-nesting.pdf", data)


def _image_page(directory: Path, name: str, image: bytes) -> Path:
    content = _stream(TEXT + b"q 500 0 0 500 50 50 cm /Im Do Q\n")
    data = _one_page(content, b"<< /Font << /F1 5 0 R >> /XObject << /Im 6 0 R >> >>", [image])
    return _write(directory, name, data)


def _zeros_deflated(size: int, chunk: int = 1 << 22) -> bytes:
    """``size`` zero bytes as a zlib stream, built in milliseconds: after a full flush a deflate
    block depends only on its input, so one chunk's block is repeated (and the checksum of zeros
    is known: a = 1, b = size mod 65521)."""
    if size <= chunk:
        return zlib.compress(bytes(size), 9)
    compressor = zlib.compressobj(9)
    head = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(chunk)) + compressor.flush(zlib.Z_FULL_FLUSH)
    rest = size - chunk
    body = head + block * (rest // chunk)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: the last partial chunk, final
    body += tail.compress(bytes(rest % chunk)) + tail.flush()
    return body + struct.pack(">I", ((size % 65521) << 16) | 1)


def flate_image(directory: Path, side: int = 40_000) -> Path:
    """An RGB image of ``side`` × ``side`` zeros: 4.8 GB inflated at the default side."""
    packed = _zeros_deflated(side * side * 3)
    extra = b" /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB /BitsPerComponent 8" % (
        side,
        side,
    )
    image = b"<< /Length %d%s /Filter /FlateDecode >>\nstream\n" % (len(packed), extra) + packed + b"\nendstream"
    return _image_page(directory, "flate-image.pdf", image)


def jbig2_image(directory: Path, side: int = 120_000) -> Path:
    """A JBIG2 page information segment declaring ``side`` × ``side`` pixels (1.8 GB of bits),
    then an end of page: the decoder allocates the page before it reads any pixel."""
    page_info = struct.pack(">IIIIBH", side, side, 0, 0, 0, 0)
    segments = struct.pack(">IBBBI", 0, 48, 0, 1, len(page_info)) + page_info
    segments += struct.pack(">IBBBI", 1, 49, 0, 1, 0)  # end of page
    extra = b" /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 1" % (
        side,
        side,
    )
    return _image_page(directory, "jbig2-image.pdf", _stream(segments, extra + b" /Filter /JBIG2Decode"))


def jpx_image(directory: Path, side: int = 100_000) -> Path:
    """A JPEG 2000 codestream whose header declares ``side`` × ``side`` 8-bit pixels in one tile."""
    siz = struct.pack(">HHIIIIIIIIHBBB", 41, 0, side, side, 0, 0, side, side, 0, 0, 1, 7, 1, 1)
    cod = struct.pack(">HBBHBBBBBB", 12, 0, 0, 1, 0, 0, 4, 4, 0, 1)
    qcd = struct.pack(">HBB", 4, 0x40, 8 << 3)
    sot = struct.pack(">HHIBB", 10, 0, 0, 0, 1)
    codestream = (
        b"\xff\x4f" + b"\xff\x51" + siz + b"\xff\x52" + cod + b"\xff\x5c" + qcd + b"\xff\x90" + sot + b"\xff\x93"
    )
    codestream += b"\x00" * 64 + b"\xff\xd9"
    extra = b" /Type /XObject /Subtype /Image /Width %d /Height %d" % (side, side)
    return _image_page(directory, "jpx-image.pdf", _stream(codestream, extra + b" /Filter /JPXDecode"))


ALL: dict[str, Callable[[Path], Path]] = {
    "nested XObjects": nested_xobjects,
    "huge compressed content": compressed_content,
    "page-count bomb": page_count,
    "deep nesting": deep_nesting,
    "zlib image bomb": flate_image,
    "JBIG2 image bomb": jbig2_image,
    "JPEG 2000 image bomb": jpx_image,
}


def _write(directory: Path, name: str, data: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(data)
    return path
