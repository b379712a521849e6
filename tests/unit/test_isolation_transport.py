"""Arguments and results across the judge/worker boundary
(gemswatch.testing.isolation.transport): one process, both ends."""

from __future__ import annotations

import os

import pytest
import torch

from gemswatch.testing.isolation import transport


def roundtrip(value, *, own=True, aliases=()):
    packed = transport.pack(value)
    fd = None if packed.fd is None else os.dup(packed.fd)
    out, received = transport.unpack(packed.header, fd, own=own, aliases=aliases)
    return out, packed, received


def test_values_and_layouts_survive():
    base = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    value = (base[1:, 2:5], base.t(), {"dim": -1, "dtype": torch.float64, "eps": 1e-6}, [torch.Size([2, 3]), None, True, "mean"])
    out, _, _ = roundtrip(value)
    sliced, transposed, kwargs, rest = out
    assert torch.equal(sliced, base[1:, 2:5]) and sliced.stride() == (8, 1) and sliced.storage_offset() == 10
    assert torch.equal(transposed, base.t()) and transposed.stride() == (1, 8)
    assert sliced.untyped_storage().nbytes() == base.untyped_storage().nbytes()  # the whole storage came along
    assert kwargs == {"dim": -1, "dtype": torch.float64, "eps": 1e-6}
    assert rest == [torch.Size([2, 3]), None, True, "mean"]


def test_tensors_of_one_storage_share_one_on_the_other_side():
    base = torch.zeros(6)
    out, packed, _ = roundtrip((base[:3], base[3:]), own=False)
    assert len({m["at"] for m in packed.header["tensors"]}) == 1
    out[0][0] = 5.0
    assert out[1].untyped_storage().data_ptr() == out[0].untyped_storage().data_ptr()


def test_without_own_memory_the_receiver_writes_what_the_sender_sees():
    x = torch.zeros(4)
    packed = transport.pack((x,))
    (y,), _ = transport.unpack(packed.header, os.dup(packed.fd), own=False)
    y.fill_(3.0)
    assert torch.equal(packed.regions[0].view(torch.float32), torch.full((4,), 3.0))
    assert torch.equal(x, torch.zeros(4))  # the sender's own tensor is untouched until it copies back


def test_a_result_in_an_arguments_memory_comes_back_as_that_argument():
    x = torch.randn(3, 4)
    answer = transport.pack((x, x[1]), aliases=[x])
    assert [m.get("alias") for m in answer.header["tensors"]] == [0, 0] and answer.fd is None
    (same, row), _ = transport.unpack(answer.header, None, own=True, aliases=[x])
    assert same is x and row.data_ptr() == x[1].data_ptr()


def test_a_subclass_arrives_as_a_plain_tensor():
    class Lies(torch.Tensor):
        pass

    out, _, _ = roundtrip(torch.ones(3).as_subclass(Lies))
    assert type(out) is torch.Tensor


def test_a_lazily_conjugated_or_negated_view_arrives_with_its_values_not_its_bytes():
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    conj, neg_imag = z.conj(), z.conj().imag  # the second is a real view with the negative bit
    (got_conj, got_neg), _, _ = roundtrip((conj, neg_imag))
    assert torch.equal(got_conj, torch.tensor([1 - 2j, 3 + 4j], dtype=torch.complex64))
    assert torch.equal(got_neg, torch.tensor([-2.0, 4.0]))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: h["tensors"][0].update(shape=[1000]), "does not fit its storage"),
        (lambda h: h["tensors"][0].update(dtype="object"), "malformed tensor description"),
        (lambda h: h["tensors"][0].update(device="../../etc"), "unknown device"),
        (lambda h: h.update(value={"$pickle": "x"}), "malformed value"),
        (lambda h: h["tensors"][0].update(nbytes=1 << 40), "smaller than its tensors"),
        (lambda h: h["tensors"][0].update(bits=["conj"]), "a conjugate bit on a real tensor"),
        (lambda h: h["tensors"][0].update(bits=["swap"]), "unknown bits"),
    ],
    ids=["layout", "dtype", "device", "tag", "size", "conj-real", "bits"],
)
def test_a_malformed_answer_is_refused(edit, message):
    packed = transport.pack((torch.ones(4),))
    edit(packed.header)
    with pytest.raises(transport.TransportError, match=message):
        transport.unpack(packed.header, os.dup(packed.fd), own=True)


def test_what_cannot_cross_is_named():
    with pytest.raises(transport.TransportError, match="a builtins.object cannot be passed"):
        transport.pack((object(),))


def test_an_arena_carries_message_after_message_in_one_memory_file():
    arena, mappings = transport.Arena(), transport.Mappings()
    seen_files, seen_maps = set(), set()
    for i in range(3):
        x = torch.full((4, 8), float(i))
        packed = transport.pack(((x,), {}), arena=arena, op="call")
        st = os.fstat(packed.fd)
        seen_files.add((st.st_ino, st.st_size))
        (args, _), received = transport.unpack(packed.header, os.dup(packed.fd), own=True, mappings=mappings)
        assert torch.equal(args[0], x)
        seen_maps.add(id(mappings.map))
        received.close()
        packed.close()  # leaves the arena's file open for the next message
        assert arena.fd is not None
    assert len(seen_files) == 1 and len(seen_maps) == 1


def test_an_arena_grows_for_a_message_larger_than_it_and_the_receiver_maps_the_new_file():
    arena, mappings = transport.Arena(), transport.Mappings()
    small = transport.pack(torch.zeros(8), arena=arena)
    first = os.fstat(small.fd).st_ino
    transport.unpack(small.header, os.dup(small.fd), own=True, mappings=mappings)[1].close()
    big = torch.arange(1 << 19, dtype=torch.float64)  # 4 MiB: more than the first file holds
    packed = transport.pack(big, arena=arena)
    assert os.fstat(packed.fd).st_ino != first and arena.size >= big.numel() * 8
    out, received = transport.unpack(packed.header, os.dup(packed.fd), own=True, mappings=mappings)
    assert torch.equal(out, big)
    received.close()
    arena.close()
    assert torch.equal(out, big)  # an owned copy outlives the arena


def test_a_memory_file_whose_size_could_change_is_refused():
    # A peer that shrinks a file the receiver has mapped would crash the
    # receiver's next read (SIGBUS): our files are sealed, others refused.
    packed = transport.pack(torch.ones(4))
    with pytest.raises(OSError):
        os.ftruncate(packed.fd, 0)
    loose = os.memfd_create("loose")
    os.ftruncate(loose, os.fstat(packed.fd).st_size)
    with pytest.raises(transport.TransportError, match="could change size"):
        transport.unpack(packed.header, loose, own=True)
    os.close(loose)


def test_an_error_names_the_innermost_line_of_the_candidates_own_code(tmp_path):
    # A kernel's error comes wrapped by the launcher that raised it: the line
    # shown is the candidate's, in the error it was raised from.
    from gemswatch.testing.isolation.worker import _where

    source = tmp_path / "cand.py"
    source.write_text("def kernel():\n    return undefined_name\n\ndef launch():\n    return kernel()\n")
    namespace: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    try:
        try:
            namespace["launch"]()
        except NameError as inner:
            raise RuntimeError("the launcher failed") from inner
    except RuntimeError as e:
        assert _where(e, {str(tmp_path)}) == f"{source}:2 in kernel: return undefined_name"
        assert _where(e, {str(tmp_path / "elsewhere")}) == ""
