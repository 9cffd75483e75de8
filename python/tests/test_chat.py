"""Chat templates and the scheduler from Python, against the plan at $LLMC_TEST_PLAN (the
bundled stories260K) and the library at $LLMC_LIBRARY. Renderings are checked against jinja2
(configured as transformers' apply_chat_template configures it) when it is installed."""

import os
import unittest

import llmc

PLAN = os.environ.get("LLMC_TEST_PLAN", "")

try:
    import jinja2
    import jinja2.sandbox
except ImportError:  # the checks against jinja2 are skipped
    jinja2 = None

TEMPLATES = {
    "roles": ("{{ bos_token }}{% for message in messages %}"
              "{% if message['role'] == 'system' %}<<SYS>>{{ message['content'] | trim }}<</SYS>>\n"
              "{% else %}[{{ message['role'] | upper }}] {{ message['content'] }}\n{% endif %}"
              "{% endfor %}{% if add_generation_prompt %}[ASSISTANT] {% endif %}"),
    "blocks": ("{%- for m in messages %}\n"
               "    {%- if loop.first and m.role != 'system' %}(no system)\n{% endif %}\n"
               "  <{{ m.role }}>{{ m.content }}</{{ m.role }}>\n"
               "{%- endfor %}\n"
               "{%- if add_generation_prompt %}<assistant>{% endif %}"),
}
MESSAGES = [
    {"role": "system", "content": "  Be kind.  "},
    {"role": "user", "content": "Tell me a story about a cat — ünïcode, 猫."},
    {"role": "assistant", "content": "Once upon a time"},
    {"role": "user", "content": "More!"},
]


def render_with_jinja2(source, messages, add_generation_prompt, **context):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=["jinja2.ext.loopcontrols"])
    return env.from_string(source).render(messages=messages,
                                          add_generation_prompt=add_generation_prompt, **context)


class ChatTemplateTest(unittest.TestCase):
    @unittest.skipIf(jinja2 is None, "jinja2 is not installed")
    def test_renders_as_jinja2(self):
        for name, source in TEMPLATES.items():
            template = llmc.ChatTemplate(source, name=f"{name}.jinja")
            for add in (False, True):
                for messages in (MESSAGES, MESSAGES[1:2], []):
                    expected = render_with_jinja2(source, messages, add, bos_token="<s>")
                    got = template.render(messages, add_generation_prompt=add, bos_token="<s>")
                    self.assertEqual(got, expected, (name, add, messages))

    def test_long_renderings_grow_the_buffer(self):
        template = llmc.ChatTemplate("{% for m in messages %}{{ m.content * 50 }}{% endfor %}")
        messages = [{"role": "user", "content": "abc"}] * 20
        self.assertEqual(template.render(messages), "abc" * 50 * 20)

    def test_errors_name_the_template_position(self):
        with self.assertRaises(llmc.LlmcError) as caught:
            llmc.ChatTemplate("{% for m in messages %}", name="broken.jinja")
        self.assertIn("broken.jinja:1:", str(caught.exception))
        template = llmc.ChatTemplate("{{ raise_exception('roles must alternate') }}",
                                     name="strict.jinja")
        with self.assertRaises(llmc.LlmcError) as caught:
            template.render(MESSAGES)
        self.assertIn("roles must alternate", str(caught.exception))
        self.assertIn("template error", str(caught.exception))

    def test_fixed_time(self):
        template = llmc.ChatTemplate("{{ strftime_now('%d %b %Y') }}")
        self.assertEqual(template.render([], fixed_time=0), "01 Jan 1970")


@unittest.skipUnless(os.path.isfile(PLAN), "set LLMC_TEST_PLAN to a stories260K plan")
class SchedulerTest(unittest.TestCase):
    def setUp(self):
        self.engine = llmc.Engine(PLAN, device="cpu", threads=1, max_sequences=4)

    def tearDown(self):
        self.engine.close()

    def test_plan_without_a_template_says_so(self):
        with self.assertRaises(llmc.LlmcError) as caught:
            self.engine.chat_template()
        self.assertIn("no chat template", str(caught.exception))

    def test_requests_match_generate(self):
        prompt = "Once upon a time"
        expected = self.engine.generate(prompt, max_tokens=24, ignore_eos=True)
        sampled = self.engine.generate(prompt, max_tokens=24, temperature=0.9, top_k=20, seed=5,
                                       ignore_eos=True)
        with llmc.Scheduler(self.engine, max_num_seqs=2, max_num_batched_tokens=16) as scheduler:
            with self.assertRaises(llmc.LlmcError) as caught:
                self.engine.generate(prompt)  # the scheduler holds the engine
            self.assertIn("busy", str(caught.exception))
            greedy = scheduler.submit(prompt, max_tokens=24, ignore_eos=True)
            topk = scheduler.submit(prompt, max_tokens=24, temperature=0.9, top_k=20, seed=5,
                                    ignore_eos=True)
            stop = expected[10:14]
            stopped = scheduler.submit(self.engine.tokenize(prompt), max_tokens=24,
                                       ignore_eos=True, stop=[stop])
            done = scheduler.run()
        self.assertEqual(done[greedy].text, expected)
        self.assertEqual(done[greedy].finish_reason, "length")
        self.assertEqual(len(done[greedy].tokens), 24)
        self.assertEqual(done[topk].text, sampled)
        self.assertEqual(done[stopped].text, expected[:expected.find(stop)])
        self.assertEqual(done[stopped].finish_reason, "stop")
        # Closed: the engine generates again.
        self.assertEqual(self.engine.generate(prompt, max_tokens=24, ignore_eos=True), expected)

    def test_bad_requests_raise(self):
        with llmc.Scheduler(self.engine) as scheduler:
            with self.assertRaises(llmc.LlmcError) as caught:
                scheduler.submit([1, 99999])
            self.assertIn("99999", str(caught.exception))
            with self.assertRaises(llmc.LlmcError):
                scheduler.submit("Once", temperature=-1.0)
            with self.assertRaises(llmc.LlmcError):
                scheduler.cancel(12345)

    def test_closing_the_engine_closes_its_scheduler_first(self):
        scheduler = llmc.Scheduler(self.engine)
        scheduler.submit("Once", max_tokens=4)
        self.engine.close()
        with self.assertRaises(llmc.LlmcError):
            scheduler.submit("Once")
        scheduler.close()


if __name__ == "__main__":
    unittest.main()
