"""Tests of the Python package against a real plan ($LLMC_TEST_PLAN: the bundled stories260K,
built by tests/python/python_test.sh) and the library at $LLMC_LIBRARY."""

import os
import unittest

import llmc

PLAN = os.environ.get("LLMC_TEST_PLAN", "")


@unittest.skipUnless(os.path.isfile(PLAN), "set LLMC_TEST_PLAN to a stories260K plan")
class EngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = llmc.Engine(PLAN, device="cpu", threads=1)

    @classmethod
    def tearDownClass(cls):
        cls.engine.close()

    def test_info_describes_the_model(self):
        info = self.engine.info
        self.assertEqual(info.architecture, "LlamaForCausalLM")
        self.assertEqual((info.vocab_size, info.max_seq_len, info.num_layers), (512, 512, 5))
        self.assertEqual((info.num_heads, info.num_kv_heads, info.head_dim), (8, 4, 8))
        self.assertEqual((info.bos_id, info.eos_id), (1, 2))
        self.assertFalse(info.synthetic)
        self.assertIn("cpu", info.backend.lower())
        self.assertRegex(llmc.library_version(), r"^\d+\.\d+\.\d+$")

    def test_tokenize_round_trips(self):
        ids = self.engine.tokenize("Once upon a time")
        self.assertEqual(ids[0], 1)  # BOS
        self.assertNotIn(1, self.engine.tokenize("Once upon a time", add_special=False))
        self.assertEqual(self.engine.detokenize(ids, skip_special=True), "Once upon a time")
        long_text = "Lily and Tom played in the park. " * 40  # grows the id buffer
        self.assertEqual(self.engine.detokenize(self.engine.tokenize(long_text, False)), long_text)
        self.assertEqual(self.engine.detokenize([]), "")

    def test_greedy_generation_tells_the_known_story(self):
        result = self.engine.generate("Once upon a time", max_tokens=20, return_result=True)
        self.assertTrue(result.text.startswith(", there was a little girl named Lily"), result.text)
        self.assertEqual(result.generated_tokens, 20)
        self.assertEqual(result.finish_reason, "length")
        self.assertGreater(result.prefill_seconds, 0)

    def test_stream_equals_generate(self):
        kwargs = dict(max_tokens=30, temperature=0.8, top_p=0.95, seed=11)
        pieces = list(self.engine.stream("Once upon a time", **kwargs))
        self.assertGreater(len(pieces), 1)
        self.assertEqual("".join(pieces), self.engine.generate("Once upon a time", **kwargs))

    def test_seed_reproduces_and_differs(self):
        a = self.engine.generate("Tom", max_tokens=30, temperature=1.0, seed=1)
        self.assertEqual(a, self.engine.generate("Tom", max_tokens=30, temperature=1.0, seed=1))
        others = {self.engine.generate("Tom", max_tokens=30, temperature=1.0, seed=s)
                  for s in range(2, 6)}
        self.assertTrue(any(o != a for o in others))

    def test_leaving_a_stream_stops_generation(self):
        for i, _ in enumerate(self.engine.stream("Once upon a time", max_tokens=400,
                                                 ignore_eos=True)):
            if i == 2:
                break
        # The engine is free again and whole: a full generation still works.
        self.assertTrue(self.engine.generate("Once upon a time", max_tokens=5))

    def test_errors_carry_the_library_message(self):
        with self.assertRaises(llmc.LlmcError) as caught:
            llmc.Engine("/nonexistent/model.plan")
        self.assertIn("/nonexistent/model.plan", str(caught.exception))
        with self.assertRaises(llmc.LlmcError) as caught:
            self.engine.generate("Once", max_tokens=0)
        self.assertIn("max_new_tokens", str(caught.exception))
        with self.assertRaises(llmc.LlmcError) as caught:
            self.engine.generate("Once", temperature=-1.0)
        self.assertIn("temperature", str(caught.exception))

    def test_callback_errors_propagate(self):
        class Boom(Exception):
            pass

        def pieces():
            for piece in self.engine.stream("Once upon a time", max_tokens=10):
                yield piece
                raise Boom()

        with self.assertRaises(Boom):
            list(pieces())

    def test_closed_engine_refuses(self):
        engine = llmc.Engine(PLAN, device="cpu", threads=1)
        with engine:
            self.assertTrue(engine.tokenize("hi"))
        with self.assertRaises(llmc.LlmcError):
            engine.tokenize("hi")


if __name__ == "__main__":
    unittest.main()
